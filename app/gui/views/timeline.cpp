// The timeline: a row per rank with its lanes (host: steps; compute: phases, layers, ops; comm: collectives;
// p2p: pipeline transfers), spans coloured by phase (by micro-batch in pipelines), idle gaps in red, zoom and pan
// with the mouse and keys, fit-to-step, and a tooltip per span. Culling and folding keep a million spans smooth.
// Pipelines get their schedule above the lanes: predicted and measured (widgets/schedule_diagram.cpp).
#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <map>

#include <cmath>

#include "app/gui/model/overlap_model.h"
#include "app/gui/widgets/theme.h"
#include "app/gui/widgets/timeline_rows.h"
#include "app/gui/views/views.h"
#include "app/gui/widgets/schedule_diagram.h"
#include "app/gui/widgets/plot.h"
#include "profiler/trace/run_info.h"
#include "common/core/format.h"
#include "common/core/memory_category.h"

namespace us::gui {

namespace {

void draw_ruler(TimelineContext& ctx, float y, int64_t origin) {
    const double span_ns = double(ctx.window.t1 - ctx.window.t0);
    // tick spacing: the smallest 1-2-5 step that leaves about 110 px per label
    const double ticks = std::max(2.0, double(ctx.window.width_px) / 110.0);
    double step = std::pow(10.0, std::floor(std::log10(span_ns / ticks)));
    if (span_ns / step > ticks) step *= 2;
    if (span_ns / step > ticks) step *= 2.5;
    if (span_ns / step > ticks) step *= 2;
    const double first = std::ceil(double(ctx.window.t0 - origin) / step) * step;
    for (double t = first; t < double(ctx.window.t1 - origin); t += step) {
        const float x = ctx.x0 + ctx.window.x_of(origin + int64_t(t));
        ctx.dl->AddLine(ImVec2(x, y + 12), ImVec2(x, y + 18), kTextDim);
        ctx.dl->AddText(ImVec2(x + 2, y), kTextDim, format_duration_ns(t).c_str());
    }
}

void span_tooltip(const prof::TraceStore& store, const prof::Span& s, uint32_t folded, int rank) {
    const char* provenance = store.provenance();
    ImGui::BeginTooltip();
    if (folded > 1) {
        ImGui::Text("%u spans folded (zoom in to see them)", folded);
        ImGui::Text("first: %s", store.name(s.name).c_str());
    } else {
        ImGui::Text("%s", span_label(store, s).c_str());
        ImGui::Text("rank %d, %s %s", rank, std::string(prof::kSpanKindNames[size_t(s.kind)]).c_str(),
                    s.op != prof::OpClass::none ? std::string(prof::kOpClassNames[size_t(s.op)]).c_str() : "");
        ImGui::Text("duration %s (%s)", format_duration_ns(double(s.end - s.begin)).c_str(), provenance);
        ImGui::Text("step %d, %s%s", s.step, std::string(prof::kPhaseNames[size_t(s.phase)]).c_str(),
                    s.micro_batch >= 0 ? fmt::format(", micro-batch {}", s.micro_batch).c_str() : "");
        if (s.layer >= 0) ImGui::Text("layer %d", s.layer);
        if (s.launcher != 0) ImGui::Text("launched by %s", store.name(s.launcher).c_str());
        if (s.kind == prof::SpanKind::comm) {  // an imported run's groups are named by its run description
            const std::string group = s.group < prof::kGroupCount
                                          ? std::string(prof::group_kind_name(prof::GroupKind(s.group)))
                                          : prof::group_name(prof::run_info_of(store), s.group);
            ImGui::Text("group %s", group.c_str());
        }
        if (s.kind == prof::SpanKind::step && s.step > 0 && store.is_imported())
            ImGui::Text("ProfilerStep#%d (Kineto's numbering)", s.step - 1);
        if (s.bytes) ImGui::Text("%s", format_bytes(int64_t(s.bytes)).c_str());
        if (s.flops)
            ImGui::Text("%.3g GFLOP, %.1f GFLOP/s (derived: formula FLOPs over the %s duration)", double(s.flops) / 1e9,
                        double(s.flops) / double(std::max<int64_t>(1, s.end - s.begin)), provenance);
        if (s.peer >= 0) ImGui::Text("peer rank %d", s.peer);
    }
    ImGui::EndTooltip();
}

// The waits blame matched (blame.h): an arrow from where a rank entered a collective to where the rank it waited
// for entered it last, between their header rows; only waits of a pixel or more, at most a few thousand a frame.
void draw_waits(const TimelineContext& ctx, const prof::Blame& blame, const std::map<int, float>& header_y) {
    const auto& edges = blame.edges;
    const int64_t span = ctx.window.t1 - ctx.window.t0;
    auto it = std::lower_bound(edges.begin(), edges.end(), ctx.window.t0 - span,
                               [](const prof::WaitEdge& e, int64_t t) { return e.waiter_begin_ns < t; });
    // Pale, apart from every span's hue (backward is orange), and only waits that are visible at this zoom: a wait
    // under a few pixels is noise on the screen, and hundreds of its arrows hid the lanes.
    const ImU32 colour = IM_COL32(235, 235, 245, 150);
    for (int drawn = 0; it != edges.end() && it->waiter_begin_ns <= ctx.window.t1 && drawn < 4000; ++it) {
        const float min_px = 4.0f;
        if (double(it->wait_ns) * ctx.window.px_per_ns() < min_px) continue;
        const auto from = header_y.find(it->waiter), to = header_y.find(it->culprit);
        if (from == header_y.end() || to == header_y.end()) continue;
        const ImVec2 a(ctx.x0 + ctx.window.x_of(it->waiter_begin_ns), from->second);
        const ImVec2 b(ctx.x0 + ctx.window.x_of(it->culprit_begin_ns), to->second);
        ctx.dl->AddLine(a, b, colour, 1.2f);
        const float dir = b.y >= a.y ? 1.0f : -1.0f;  // the head points at the rank waited for
        ctx.dl->AddTriangleFilled(b, ImVec2(b.x - 4, b.y - 7 * dir), ImVec2(b.x + 4, b.y - 7 * dir), colour);
        ++drawn;
    }
}

// Follow, fit all, fit step and the window's width.
void draw_toolbar(AppState& app) {
    const auto& rep = app.report();
    ImGui::Checkbox("follow", &app.window.follow);
    ImGui::SameLine();
    if (ImGui::Button("fit all")) app.fit_all();
    ImGui::SameLine();
    int last_step = 0;
    for (const auto& r : rep.ranks)
        if (!r.steps.empty()) last_step = std::max(last_step, r.steps.back().step);
    if (ImGui::Button("fit step") && last_step > 0) {
        const int mid = step_at(rep, (app.window.t0 + app.window.t1) / 2);
        app.window.fit_step(rep, mid > 0 ? mid : last_step);
    }
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(0.7f, 0.7f, 0.7f, 1), "window %s  |  wheel: zoom, drag: pan, F: fit step, A: all",
                       format_duration_ns(double(app.window.t1 - app.window.t0)).c_str());
    ImGui::SameLine();
}

// What the colours mean: phases (by micro-batch in a pipeline), comm, tp's and ep's collectives, idle; and the
// waits' switch where the blame has any.
void draw_legend(AppState& app) {
    const auto& rep = app.report();
    const ParallelLayout& layout = rep.predict_input.parallel;
    if (layout.pp > 1) {  // phases take their micro-batch's colour: the run's first four
        const int shown = int(std::min<int64_t>(rep.predict_input.grad_accum, 4));
        for (int mb = 0; mb < shown; ++mb) {
            legend_item(micro_batch_color(mb, prof::Phase::forward), fmt::format("F{}", mb).c_str());
            ImGui::SameLine();
            legend_item(micro_batch_color(mb, prof::Phase::backward), fmt::format("B{}", mb).c_str());
            ImGui::SameLine();
        }
        if (rep.predict_input.grad_accum > shown) {
            ImGui::TextUnformatted("...");
            if (ImGui::IsItemHovered())
                ImGui::SetTooltip("a hue per micro-batch (%lld a step), forward lighter, backward darker",
                                  static_cast<long long>(rep.predict_input.grad_accum));
            ImGui::SameLine();
        }
    } else {
        legend_item(phase_color(prof::Phase::forward), "forward");
        ImGui::SameLine();
        legend_item(phase_color(prof::Phase::backward), "backward");
        ImGui::SameLine();
    }
    legend_item(phase_color(prof::Phase::optimizer), "optimizer");
    ImGui::SameLine();
    legend_item(collective_color(prof::OpClass::all_reduce), "all-reduce");
    ImGui::SameLine();
    if (layout.zero > 0) {  // ZeRO's sharded gradients and parameters
        legend_item(collective_color(prof::OpClass::reduce_scatter), "reduce-scatter");
        ImGui::SameLine();
        legend_item(collective_color(prof::OpClass::all_gather), "all-gather");
        ImGui::SameLine();
    }
    if (layout.pp > 1) {
        legend_item(collective_color(prof::OpClass::send), "send/recv");
        ImGui::SameLine();
    }
    if (rep.predict_input.parallel.tp > 1) {
        legend_item(tp_comm_color(), "tp comm (critical path)");
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip(
                "tensor-parallel collectives: all-reduce (reduce_from_tp_region, copy_to_tp_region's "
                "backward);\nwith sequence parallelism all-gather (lighter) and reduce-scatter (darker).\n"
                "The compute thread waits for each of them: none is hidden behind compute.");
        ImGui::SameLine();
    }
    if (rep.predict_input.parallel.ep > 1) {
        legend_item(ep_comm_color(), "ep all-to-all");
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip(
                "expert parallelism: per MoE block the row counts, the token rows to the experts and back\n"
                "in forward, and their gradients both ways in backward. The compute thread waits for\n"
                "each; a rank whose experts got fewer rows waits for the busiest one here.");
        ImGui::SameLine();
    }
    legend_item(kIdleColor, layout.pp > 1 ? "idle (bubble)" : "idle");  // as drawn: translucent
    if (!rep.cross.blame.edges.empty()) {
        ImGui::SameLine();
        ImGui::Checkbox("waits", &app.window.show_waits);
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip(
                "Arrows from a rank that entered a collective early to the rank it waited for (the "
                "last to enter),\nbetween their header rows (measured; docs/blame.md). The waiting rank "
                "is the victim, the arrow's head the culprit.\nOnly waits of 4 pixels or more at this zoom: "
                "zoom in for the short ones.");
    }
}

// A planner's prediction shown in the views says so, and which ranks stand for the rest.
void draw_prediction_note(const AppState& app, const prof::TraceStore& store) {
    if (!app.showing_prediction() || !store.run_rank_metadata().predicted) return;
    const nlohmann::json& p = *store.run_rank_metadata().predicted;
    ImGui::TextColored(kPredictedColor,
                       "PREDICTED by the planner's model, not measured: %s on %lld GPUs of %s. One rank "
                       "per pipeline stage stands for its %lld (tp, cp, dp, ep index 0); %s.",
                       p.value("model", std::string("?")).c_str(), (long long)p.value("gpus", 0LL),
                       p.value("cluster", std::string("?")).c_str(),
                       (long long)(p.value("gpus", 0LL) / std::max(1, app.report().predict_input.parallel.pp)),
                       p.value("detail", std::string("layer by layer")).c_str());
}

// The rows (a header and lanes per rank) from the top of the lanes; returns where they end. The Ranks view's pick
// scrolls into view once.
float draw_rows(AppState& app, TimelineContext& ctx, ImVec2 p0) {
    const float top = p0.y;
    const prof::Report& rep = app.report();
    auto rows = make_timeline_rows(*ctx.store, rep, blamed_ranks(rep.cross.blame));
    float y = top + 20;
    ctx.dl->PushClipRect(p0, ImVec2(ctx.x0 + ctx.window.width_px, top + 100000), true);
    std::map<int, float> header_y;  // rank -> its header row's middle
    for (auto& row : rows) {
        if (row->header_rank() >= 0 && row->header_rank() == app.window.focus_rank) {  // the Ranks view's pick
            ImGui::SetScrollY(y - top);
            app.window.focus_rank = -1;
        }
        if (row->header_rank() >= 0) header_y[row->header_rank()] = y + ctx.row_h / 2;
        row->draw(ctx, y);
        y += row->height(ctx);
    }
    if (app.window.show_waits) draw_waits(ctx, rep.cross.blame, header_y);
    ctx.dl->PopClipRect();
    return y;
}

// Over the lanes: wheel zoom (shift: scroll), drag pan, the keys, and the hovered span's tooltip.
void handle_input(AppState& app, const TimelineContext& ctx) {
    const ImGuiIO& io = ImGui::GetIO();
    const int64_t t_mouse = ctx.window.t_of(io.MousePos.x - ctx.x0);
    if (io.MouseWheel != 0 && !io.KeyShift) app.window.zoom(io.MouseWheel > 0 ? 0.8 : 1.25, t_mouse);
    if (io.MouseWheel != 0 && io.KeyShift) ImGui::SetScrollY(ImGui::GetScrollY() - io.MouseWheel * 40);
    if (ImGui::IsMouseDragging(ImGuiMouseButton_Left))
        app.window.pan(-int64_t(double(io.MouseDelta.x) / ctx.window.px_per_ns()));
    if (!io.WantTextInput) {
        if (ImGui::IsKeyPressed('F')) app.window.fit_step(app.report(), step_at(app.report(), t_mouse));
        if (ImGui::IsKeyPressed('A')) app.fit_all();
        if (ImGui::IsKeyPressed('L')) app.window.follow = !app.window.follow;
        if (ImGui::IsKeyPressed('=') || ImGui::IsKeyPressed(334 /* keypad + */)) app.window.zoom(0.8, t_mouse);
        if (ImGui::IsKeyPressed('-') || ImGui::IsKeyPressed(333 /* keypad - */)) app.window.zoom(1.25, t_mouse);
        if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_LeftArrow)))
            app.window.pan(-(app.window.t1 - app.window.t0) / 8);
        if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_RightArrow)))
            app.window.pan((app.window.t1 - app.window.t0) / 8);
    }
    if (ctx.hovered) span_tooltip(*ctx.store, *ctx.hovered, ctx.hovered_folded, ctx.hovered_rank);
}

// The lanes: the ruler, the rows, and what the mouse and keys do over them.
void draw_lanes(AppState& app, const prof::TraceStore& store) {
    ImGui::BeginChild("lanes", ImVec2(0, 0), false, ImGuiWindowFlags_NoScrollWithMouse);
    ImGui::PushFont(small_font());
    TimelineContext ctx;
    ctx.dl = ImGui::GetWindowDrawList();
    ctx.store = &store;
    ctx.derived = &app.derived;
    ctx.row_h = ImGui::GetTextLineHeight() + 1;
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    const float gutter = 96;
    ctx.x0 = p0.x + gutter;
    ctx.window = TimeWindow{app.window.t0, std::max(app.window.t1, app.window.t0 + 1),
                            std::max(50.0f, ImGui::GetContentRegionAvail().x - gutter)};
    draw_ruler(ctx, p0.y, store.origin());
    const float y = draw_rows(app, ctx, p0);
    ImGui::SetCursorScreenPos(p0);
    ImGui::InvisibleButton("timeline_area", ImVec2(gutter + ctx.window.width_px, std::max(1.0f, y - p0.y)));
    if (ImGui::IsItemHovered()) handle_input(app, ctx);
    ImGui::PopFont();
    ImGui::EndChild();
}

}  // namespace

void draw_timeline_view(AppState& app) {
    const prof::TraceStore* store = app.store();
    draw_toolbar(app);
    draw_legend(app);
    if (!store || store->rank_count() == 0) {
        ImGui::TextColored(ImVec4(0.7f, 0.7f, 0.7f, 1), "%s", app.no_ranks_words().c_str());
        return;
    }
    draw_prediction_note(app, *store);
    if (app.report().predict_input.parallel.pp > 1 &&
        ImGui::CollapsingHeader(!app.showing_prediction()
                                    ? "pipeline schedule: predicted above, measured below"
                                    : "pipeline schedule: the textbook's above, the planner's model below",
                                ImGuiTreeNodeFlags_DefaultOpen)) {
        ImGui::PushFont(small_font());
        draw_pipeline_schedule(app, step_at(app.report(), (app.window.t0 + app.window.t1) / 2));
        ImGui::PopFont();
    }
    draw_lanes(app, *store);
}

}  // namespace us::gui
