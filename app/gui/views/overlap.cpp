// Overlap and utilization: per rank, a bar of its steady-step time split into compute alone, communication hidden
// behind compute, exposed communication and idle; the same figures in a table with the pipeline bubble against its
// theory; the rank losing the most time highlighted; and communication by process group (dp, tp, pp ...): bytes
// measured against predicted, time, and how much of it is exposed (tensor parallelism's is all of it).
#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <tuple>

#include "app/gui/widgets/miss_marker.h"
#include "app/gui/model/overlap_model.h"
#include "app/gui/widgets/theme.h"
#include "app/gui/views/views.h"
#include "common/core/format.h"
#include "profiler/analysis/steady_step.h"

namespace us::gui {

namespace {
constexpr ImU32 kCompute = IM_COL32(90, 150, 240, 255);
constexpr ImU32 kOverlapped = IM_COL32(120, 200, 140, 255);
constexpr ImU32 kExposed = IM_COL32(235, 120, 70, 255);
constexpr ImU32 kIdle = IM_COL32(200, 60, 60, 255);
}  // namespace

namespace {

// Per rank and group, over the steady steps: bytes sent per step (measured from the collectives in the trace /
// predicted by the engine's walk), time with a collective outstanding, the exposed part of it.
// An imported run's process groups, named as the trace names them (the report's imported section), over its steps.
void draw_imported_group_table(const prof::Report& rep) {
    ImGui::Spacing();
    ImGui::TextUnformatted("communication by process group (measured, per profiled step)");
    const nlohmann::json& ranks = rep.imported_section.json.value("ranks", nlohmann::json::array());
    int rows = 0;
    for (const auto& r : ranks) rows += int(r.value("comm_by_process_group", nlohmann::json::array()).size());
    if (rows == 0) {
        ImGui::TextColored(ImVec4(0.65f, 0.65f, 0.65f, 1),
                           "  no collectives (NCCL send/recv kernels are the pipeline's "
                           "transfers, shown as p2p)");
        return;
    }
    if (!begin_wide_table("imported_groups", 4, rows)) return;
    for (const char* h : {"rank", "process group", "time", "exposed"}) ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    for (const auto& r : ranks) {
        const double steps = std::max(1.0, r.value("steps", 1.0));
        for (const auto& g : r.value("comm_by_process_group", nlohmann::json::array())) {
            const double time = g.value("comm_s", 0.0) / steps, exposed = g.value("exposed_s", 0.0) / steps;
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::Text("%d", r.value("rank", -1));
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(g.value("name", std::string("?")).c_str());
            ImGui::TableNextColumn();
            ImGui::Text("%.2f ms", 1e3 * time);
            ImGui::TableNextColumn();
            ImGui::Text("%.2f ms (%.0f%%)", 1e3 * exposed, time > 0 ? 100 * exposed / time : 0.0);
        }
    }
    ImGui::EndTable();
}

void draw_group_table(const prof::Report& rep) {
    if (rep.imported) return draw_imported_group_table(rep);
    ImGui::Spacing();
    ImGui::TextUnformatted("communication by group (per steady step)");
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "bytes: what the rank sends for the group's collectives (ring algorithms), measured from the\n"
            "collectives in the trace / predicted from the engine's own walk (docs/formulas.md).\n"
            "exposed: time a collective of the group was outstanding with no compute under it.");
    int rows = 0;
    for (const auto& r : rep.ranks)
        for (int g = 0; g < prof::kGroupCount; ++g)
            rows += r.steady.group_bytes[size_t(g)] != 0 || r.predicted.comm_bytes[size_t(g)] != 0 ||
                    r.steady.group_comm_s[size_t(g)] != 0;
    if (rows == 0) {
        ImGui::TextColored(ImVec4(0.65f, 0.65f, 0.65f, 1), "  no collectives in the steady steps");
        return;
    }
    if (!begin_wide_table("groups", 6, rows)) return;
    for (const char* h : {"rank", "group", "sent (measured)", "sent (predicted)", "time", "exposed"})
        ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    for (const auto& r : rep.ranks) {
        const double steps = double(std::max<size_t>(1, prof::steady_step_count(r.steps)));
        for (int g = 0; g < prof::kGroupCount; ++g) {
            const double bytes = r.steady.group_bytes[size_t(g)] / steps;
            if (bytes == 0 && r.predicted.comm_bytes[size_t(g)] == 0 && r.steady.group_comm_s[size_t(g)] == 0) continue;
            // The pipeline's sends and receives are its transfers, timed apart from the collectives (p2p_s); the
            // time a stage waits on one is its bubble, in the table above, not exposed communication.
            const bool pipeline = g == int(prof::GroupKind::pp);
            const double time = (pipeline ? r.steady.p2p_s : r.steady.group_comm_s[size_t(g)]) / steps,
                         exposed = r.steady.group_exposed_s[size_t(g)] / steps;
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::Text("%d", r.rank);
            ImGui::TableNextColumn();
            const prof::GroupKind kind = prof::GroupKind(g);
            const std::string name(prof::group_kind_name(kind));
            const bool tp = kind == prof::GroupKind::tp, across = r.group_hosts[size_t(g)] > 1;
            const std::string label = overlap_group_label(r, g);
            if (tp || across)
                ImGui::TextColored(ImVec4(1.0f, 0.55f, 0.35f, 1), "%s", label.c_str());
            else
                ImGui::Text("%s", label.c_str());
            if (ImGui::IsItemHovered() && (tp || across)) {
                std::string tip;
                if (tp) tip = "tensor-parallel collectives block the compute thread: all of their time is exposed";
                if (across) {
                    const int8_t edge = r.ring_successor_across[size_t(g)];
                    tip += std::string(tip.empty() ? "" : "\n") +
                           "the group's ranks are on several nodes (their recorded hosts): its collectives crossed "
                           "the inter-node link" +
                           (edge == 1   ? ";\nthis rank's ring edge is inter-node: all it sends crosses (formula)"
                            : edge == 0 ? ";\nthis rank's ring edge stays in its node (formula)"
                                        : "");
                }
                ImGui::SetTooltip("%s", tip.c_str());
            }
            ImGui::TableNextColumn();
            ImGui::Text("%s", format_bytes(int64_t(bytes)).c_str());
            miss_marker(rep.misses, "comm." + name, r.rank);
            ImGui::TableNextColumn();
            if (rep.imported)
                ImGui::TextUnformatted("unknown");  // no model or layout behind a PyTorch trace
            else
                ImGui::Text("%s", format_bytes(r.predicted.comm_bytes[size_t(g)]).c_str());
            ImGui::TableNextColumn();
            ImGui::Text("%.2f ms", 1e3 * time);
            if (pipeline && ImGui::IsItemHovered())
                ImGui::SetTooltip(
                    "time with a pipeline send or receive outstanding (transfers and waits for a "
                    "neighbour alike)");
            ImGui::TableNextColumn();
            if (pipeline)
                ImGui::TextUnformatted("in the bubble");
            else
                ImGui::Text("%.2f ms (%.0f%%)", 1e3 * exposed, time > 0 ? 100 * exposed / time : 0.0);
        }
    }
    ImGui::EndTable();
}

// Holistic Trace Analysis's figures per rank (hta_breakdown.h), for ranks with GPU kernels: the same definitions as
// HTA 0.5.0, so a user can hold them against HTA's own output. HTA counts NCCL send/recv kernels as communication,
// where the rows above count them as the pipeline's transfers.
void draw_hta_table(const prof::Report& rep) {
    int rows = 0;
    for (const auto& r : rep.ranks) rows += r.hta.has_value();
    if (rows == 0) return;
    ImGui::Spacing();
    ImGui::TextUnformatted("Holistic Trace Analysis's breakdown (measured; HTA's definitions, docs/formulas.md)");
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "idle / compute / non-compute: shares of the kernel time (first kernel to last, all streams).\n"
            "overlap: time with computation and communication kernels both running / communication time.\n"
            "host wait: the launch came after the stream's previous kernel ended; kernel wait: a gap under\n"
            "30 us; other: the rest. Steps: every ProfilerStep but the last, as HTA counts them.");
    if (!begin_wide_table("hta", 7, rows)) return;
    for (const char* h :
         {"rank", "kernel time", "idle", "compute", "non-compute", "comm/comp overlap", "host / kernel wait, other"})
        ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    for (const auto& r : rep.ranks) {
        if (!r.hta) continue;
        const prof::HtaFigures& f = r.hta->total;
        const double k = std::max(1e-9, f.kernel_time_us);
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::Text("%d", r.rank);
        ImGui::TableNextColumn();
        ImGui::Text("%.1f ms", f.kernel_time_us / 1e3);
        for (double v : {f.idle_time_us, f.compute_time_us, f.non_compute_time_us}) {
            ImGui::TableNextColumn();
            ImGui::Text("%.1f%%", 100 * v / k);
        }
        ImGui::TableNextColumn();
        if (f.comp_comm_overlap_pct)
            ImGui::Text("%.1f%%", *f.comp_comm_overlap_pct);
        else
            ImGui::TextUnformatted("unknown (no communication kernels)");
        ImGui::TableNextColumn();
        if (f.host_wait_us && f.kernel_wait_us && f.other_us)
            ImGui::Text("%.1f / %.1f, %.1f ms", *f.host_wait_us / 1e3, *f.kernel_wait_us / 1e3, *f.other_us / 1e3);
        else
            ImGui::TextUnformatted("unknown (no launch times)");
    }
    ImGui::EndTable();
}

// The pipeline's bubble: measured on the busiest stage, the formula's and the simulated schedule's, as bars.
void draw_bubble(const AppState& app, const prof::PipelineBubble& pb) {
    std::string formula;
    for (const auto& r : app.report().ranks)
        if (r.rank == pb.busiest_rank) formula = r.predicted.bubble_formula;
    ImGui::Text("pipeline bubble: %s %.3f", app.provenance(), pb.measured);
    miss_marker(app.report().misses, "pipeline.bubble", pb.busiest_rank);
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(0.65f, 0.65f, 0.65f, 1), "(busiest stage, rank %d)", pb.busiest_rank);
    ImGui::SameLine();
    ImGui::Text("  predicted %s = %.3f, simulated %.3f", formula.c_str(), pb.theory, pb.simulated);
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "measured: idle time of the busiest stage between the pipeline's first and last op of a\n"
            "step, over its op time. predicted: the textbook formula. simulated: the run's schedule\n"
            "on an ideal machine (forward 1, backward 2, no communication time).");
    const float w = ImGui::GetContentRegionAvail().x * 0.5f, h = ImGui::GetTextLineHeight();
    const float scale = float(std::max({pb.measured, pb.theory, pb.simulated, 1e-9}));
    ImDrawList* dl = ImGui::GetWindowDrawList();
    for (auto [label, v, color] : {std::tuple{app.provenance(), pb.measured, kIdle},
                                   {"predicted", pb.theory, kCompute},
                                   {"simulated", pb.simulated, kOverlapped}}) {
        const ImVec2 p = ImGui::GetCursorScreenPos();
        dl->AddRectFilled(ImVec2(p.x + 80, p.y + 2), ImVec2(p.x + 80 + w * float(v) / scale, p.y + h - 1), color);
        ImGui::TextColored(ImVec4(0.75f, 0.75f, 0.75f, 1), "%s", label);
        ImGui::SameLine(90 + w);
        ImGui::Text("%.3f", v);
    }
}

// A bar per rank: compute alone, comm hidden, comm exposed, idle; the rank the blame names outlined.
void draw_bars(const AppState& app, const OverlapModel& m) {
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float bar_h = ImGui::GetTextLineHeight() + 4;
    for (size_t i = 0; i < m.bars.size(); ++i) {
        const OverlapBar& b = m.bars[i];
        const bool worst = int(i) == m.marked;
        ImGui::TextColored(worst ? ImVec4(1, 0.5f, 0.4f, 1) : ImVec4(0.9f, 0.9f, 0.9f, 1), "%s%s", b.label.c_str(),
                           worst ? ("  <- " + m.mark + " (Ranks view)").c_str() : "");
        const ImVec2 p = ImGui::GetCursorScreenPos();
        const float w = ImGui::GetContentRegionAvail().x;
        float x = p.x;
        for (auto [frac, color] : {std::pair{b.compute_only, kCompute},
                                   {b.overlapped, kOverlapped},
                                   {b.exposed, kExposed},
                                   {b.idle, kIdle}}) {
            const float dx = float(std::max(0.0, frac)) * w;
            dl->AddRectFilled(ImVec2(x, p.y), ImVec2(x + dx, p.y + bar_h), color);
            x += dx;
        }
        if (worst)
            dl->AddRect(ImVec2(p.x - 1, p.y - 1), ImVec2(p.x + w + 1, p.y + bar_h + 1), IM_COL32(255, 110, 90, 255), 0,
                        0, 2);
        ImGui::InvisibleButton(fmt::format("bar{}", i).c_str(), ImVec2(w, bar_h));
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip(
                "%s (%s)\ncompute %.1f%%\ncomm hidden behind compute %.1f%%\ncomm exposed %.1f%%\nidle %.1f%%",
                b.label.c_str(), app.provenance(), 100 * b.compute_only, 100 * b.overlapped, 100 * b.exposed,
                100 * b.idle);
    }
}

// The same figures per rank in a table, with each stage's bubble against the formula's.
void draw_rank_table(const AppState& app, const OverlapModel& m) {
    if (!begin_wide_table("overlap", 5, int(m.bars.size()))) return;
    // Each column says what it is a share of: overlap is of the communication, exposed and idle of the step.
    ImGui::TableSetupColumn("rank");
    ImGui::TableSetupColumn("comm hidden, of comm");
    ImGui::TableSetupColumn("exposed, of step");
    ImGui::TableSetupColumn("idle, of step");
    ImGui::TableSetupColumn("bubble / work (formula)");
    ImGui::TableHeadersRow();
    for (size_t i = 0; i < m.bars.size(); ++i) {
        const OverlapBar& b = m.bars[i];
        ImGui::TableNextRow();
        if (int(i) == m.marked) ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg0, IM_COL32(90, 30, 30, 255));
        ImGui::TableNextColumn();
        ImGui::Text("%d", b.rank);
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s: %.3f s over the steady steps", b.label.c_str(), b.wall_s);
        ImGui::TableNextColumn();
        ImGui::Text("%.1f%%", b.overlap_pct);
        ImGui::TableNextColumn();
        ImGui::Text("%.1f%%", 100 * b.exposed);
        ImGui::TableNextColumn();
        ImGui::Text("%.1f%%", 100 * b.idle);
        ImGui::TableNextColumn();
        if (app.report().predict_input.parallel.pp > 1)
            ImGui::Text("%.2f (%.2f)", b.bubble_fraction, b.bubble_theory);
        else
            ImGui::TextUnformatted("no pipeline");  // idle inside the step is exposed comm or waiting
    }
    ImGui::EndTable();
}

}  // namespace

void draw_overlap_view(AppState& app) {
    const OverlapModel m = build_overlap_model(app.report());
    legend_item(kCompute, "compute");
    ImGui::SameLine();
    legend_item(kOverlapped, "comm hidden");
    ImGui::SameLine();
    legend_item(kExposed, "comm exposed");
    ImGui::SameLine();
    legend_item(kIdle, "idle");
    if (m.bars.empty()) {
        ImGui::TextColored(ImVec4(0.7f, 0.7f, 0.7f, 1), "no steps measured yet");
        return;
    }
    if (!app.showing_prediction()) {
        // Which steps the steady ones are (steady_step.h): a PyTorch trace starts after its warm-up and keeps all.
        const auto& ranks = app.report().ranks;
        const std::string which =
            ranks.empty() || ranks.front().steps.empty()
                ? "the steady steps"
                : prof::steady_steps_said(ranks.front().steps.front().step, ranks.front().steps.size());
        ImGui::TextColored(ImVec4(0.65f, 0.65f, 0.65f, 1), "measured over the steady steps: %s", which.c_str());
    } else
        ImGui::TextColored(kPredictedColor,
                           "PREDICTED by the planner's model over its steady steps: nothing here was measured");
    if (const prof::PipelineBubble& pb = app.report().pipeline; pb.busiest_rank >= 0) draw_bubble(app, pb);
    draw_bars(app, m);
    ImGui::Spacing();
    draw_rank_table(app, m);
    ImGui::TextColored(ImVec4(0.65f, 0.65f, 0.65f, 1),
                       "comm hidden = communication under compute / all communication; bubble: %s (the formula's "
                       "in brackets)",
                       app.provenance());
    draw_group_table(app.report());
    draw_hta_table(app.report());
}

}  // namespace us::gui
