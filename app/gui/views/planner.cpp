// The Planner view: a model on a cluster you may not have. Pick the model, the cluster and the GPU count; the
// search ranks every valid layout (fitting ones fastest first, then why the others lose); the selected layout's
// memory anatomy and step-time pieces are drawn as the measured views draw a run, labelled predicted, formula or
// model, with its pipeline schedule; a layout this machine can run launches for real in one click.
#include <fmt/format.h>
#include <imgui.h>

#include <filesystem>

#include "app/gui/widgets/theme.h"
#include "app/gui/views/views.h"
#include "app/gui/widgets/schedule_diagram.h"
#include "app/plan/predicted_trace.h"
#include "common/core/check.h"
#include "common/core/format.h"

namespace us::gui {

namespace {

std::string seconds(double s) {
    if (s >= 1) return fmt::format("{:.2f} s", s);
    if (s >= 1e-3) return fmt::format("{:.1f} ms", s * 1e3);
    return fmt::format("{:.0f} us", s * 1e6);
}

// One horizontal bar of labelled parts (bytes or seconds), each in its own colour, scaled to `total`.
struct Part {
    const char* name;
    double value;
    ImU32 color;
};
void stacked_bar(const std::vector<Part>& parts, double total, const std::string& (*format)(double, std::string&)) {
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float w = ImGui::GetContentRegionAvail().x, h = ImGui::GetTextLineHeight() * 1.4f;
    float x = p.x;
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    for (const Part& part : parts) {
        if (part.value <= 0 || total <= 0) continue;
        const float pw = float(part.value / total) * w;
        dl->AddRectFilled(ImVec2(x, p.y), ImVec2(x + pw, p.y + h), part.color);
        if (pw > ImGui::CalcTextSize(part.name).x + 4)
            dl->AddText(ImVec2(x + 2, p.y + 2), IM_COL32(15, 15, 20, 255), part.name);
        if (mouse.x >= x && mouse.x < x + pw && mouse.y >= p.y && mouse.y < p.y + h && ImGui::IsWindowHovered()) {
            std::string text;
            ImGui::SetTooltip("%s: %s", part.name, format(part.value, text).c_str());
        }
        x += pw;
    }
    dl->AddRect(p, ImVec2(p.x + w, p.y + h), kGridColor);
    ImGui::Dummy(ImVec2(w, h + 2));
}

const std::string& bytes_text(double v, std::string& out) { return out = format_bytes(int64_t(v)); }
const std::string& seconds_text(double v, std::string& out) { return out = seconds(v); }

// Each part's colour, name and figure under its bar (a narrow part has no room for its name on it), wrapped.
void bar_legend(const std::vector<Part>& parts, const std::string& (*format)(double, std::string&)) {
    std::string text;
    for (const Part& part : parts) {
        if (part.value <= 0) continue;
        ImGui::SameLine(0, em(4));
        if (ImGui::GetContentRegionAvail().x < em(140)) ImGui::NewLine();
        legend_item(part.color, fmt::format("{} {}", part.name, format(part.value, text)).c_str());
    }
    ImGui::NewLine();
}

void draw_memory(const PlannerState::Plan& p, const predict::PlanResult& r) {
    const predict::MemoryEstimate& m = r.memory;
    ImGui::Text("Memory per GPU, busiest rank (stage %d, %d micro-batch%s in flight): %s of %s (%s)", m.stage,
                m.micro_batches_in_flight, m.micro_batches_in_flight == 1 ? "" : "es", format_bytes(m.total()).c_str(),
                format_bytes(p.cluster.memory_bytes).c_str(), m.kind.c_str());
    std::vector<Part> parts;
    for (int c = 0; c < kMemCategoryCount; ++c)
        if (m.modelled[size_t(c)])
            parts.push_back({kMemCategoryNames[size_t(c)].data(), double(m.bytes[size_t(c)]), category_color(c)});
    parts.push_back({"runtime reserve", double(m.reserved_bytes), IM_COL32(110, 110, 110, 255)});
    stacked_bar(parts, double(std::max<int64_t>(p.cluster.memory_bytes, m.total())), bytes_text);
    bar_legend(parts, bytes_text);
}

void draw_time(const predict::PlanResult& r) {
    const predict::StepPieces& t = r.time;
    ImGui::Text("Step time %s (model): %s tokens/s, MFU %.1f%% (derived)", seconds(t.step_s).c_str(),
                fmt::format("{:.0f}", r.tokens_per_s).c_str(), 100 * r.mfu);
    const std::vector<Part> parts = {
        {"GEMMs", t.gemm_s, phase_color(prof::Phase::forward)},
        {"attention", t.attention_s, IM_COL32(120, 170, 255, 255)},
        {"other ops", t.other_ops_s, IM_COL32(150, 150, 200, 255)},
        {"recompute", t.recompute_s, IM_COL32(200, 160, 255, 255)},
        {"tp comm", t.tp_comm_s, tp_comm_color()},
        {"cp exposed", t.cp_comm_exposed_s, IM_COL32(255, 210, 120, 255)},
        {"ep all-to-all", t.ep_comm_s, ep_comm_color()},
        {"pp transfers", t.pp_comm_s, IM_COL32(230, 230, 140, 255)},
        {"bubble", t.bubble_s, kIdleColor | IM_COL32(0, 0, 0, 255)},
        {"dp exposed", t.dp_comm_exposed_s, IM_COL32(255, 140, 80, 255)},
        {"optimizer", t.optimizer_s, phase_color(prof::Phase::optimizer)},
        {"slowed by hidden comm", t.overlap_slowdown_s, IM_COL32(200, 120, 120, 255)},
    };
    stacked_bar(parts, t.step_s, seconds_text);
    bar_legend(parts, seconds_text);
    std::string hidden;  // only what there is: "dp 316.2 ms", not "cp ring 0 us" beside it
    if (t.dp_comm_hidden_s > 0) hidden += "dp " + seconds(t.dp_comm_hidden_s);
    if (t.cp_comm_hidden_s > 0) hidden += (hidden.empty() ? "cp ring " : ", cp ring ") + seconds(t.cp_comm_hidden_s);
    if (!hidden.empty())
        ImGui::TextColored(ImVec4(0.7f, 0.7f, 0.7f, 1), "hidden behind compute (not added): %s", hidden.c_str());
}

void draw_schedule(const predict::PlanResult& r) {
    const predict::Layout& l = r.layout;
    const ParallelLayout& par = l.parallel;
    if (par.pp <= 1) return;
    predict::PredictInput in;
    in.parallel.pp = par.pp;
    in.parallel.pp_schedule = par.pp_schedule;
    in.parallel.pp_chunks = par.pp_chunks;
    in.grad_accum = l.grad_accum;
    in.layers = std::max<int64_t>(par.pp * par.pp_chunks, 1);
    const PipelineDiagram d = theory_diagram(in);
    if (d.stages > 0) draw_pipeline_diagram(d, par.pp_chunks, ImGui::GetContentRegionAvail().x);
}

// The run launched from here, measured, beside what the planner predicted for it.
void draw_launched(AppState& app, const PlannerState& s) {
    if (!s.launched || !app.source.live() || app.source.live() != s.launched_run) return;
    const predict::PlanResult& r = *s.launched;
    const prof::Report& rep = app.report();
    ImGui::Separator();
    ImGui::Text("Launched here: %s%s", r.layout.describe().c_str(), app.source.running() ? " (running)" : "");
    const int64_t measured_mem = measured_modelled_peak(rep, r.memory);
    if (!begin_wide_table("launched", 3, 4)) return;
    const std::string predicted_on = "predicted on " + s.launched_cluster;
    for (const char* h : {"", predicted_on.c_str(), "measured here"}) ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    auto row = [](const char* what, const std::string& predicted, const std::string& measured) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(what);
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(predicted.c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(measured.c_str());
    };
    const bool steps = rep.throughput.steps_measured > 0;
    row("step time", seconds(r.time.step_s) + " (model)",
        steps ? seconds(rep.throughput.step_s) : "waiting for a steady step");
    row("tokens/s", fmt::format("{:.0f} (derived)", r.tokens_per_s),
        steps ? fmt::format("{:.0f}", rep.throughput.tokens_per_s) : "-");
    row("memory, busiest rank", format_bytes(r.memory.categories_total()) + " (" + r.memory.kind + ")",
        measured_mem > 0 ? format_bytes(measured_mem) : "-");
    ImGui::EndTable();
    if (s.launched_cluster != "this-machine" && s.launched_cluster != "machine.json")
        ImGui::TextColored(ImVec4(0.7f, 0.7f, 0.7f, 1),
                           "times are predicted for %s, not for this machine: pick machine.json "
                           "(ultrascope calibrate) to compare them; memory compares as it is",
                           s.launched_cluster.c_str());
}

// The search's question: the model, the cluster, the GPUs and the global batch; Plan starts it.
void draw_question(PlannerState& s, PlannerViewState& lists) {
    if (!lists.lists_read) {
        lists.lists_read = true;
        lists.models = predict::known_models();
        lists.clusters = predict::known_clusters();
        if (std::filesystem::exists("machine.json"))
            lists.clusters.push_back("machine.json");  // ultrascope calibrate's
    }
    ImGui::SetNextItemWidth(em(150));
    text_combo("model", s.model, lists.models);
    ImGui::SameLine(0, em(18));  // a gap after each name, so that it reads with its own field
    ImGui::SetNextItemWidth(em(130));
    text_combo("cluster", s.cluster, lists.clusters);
    ImGui::SameLine(0, em(18));
    ImGui::SetNextItemWidth(em(100));
    ImGui::InputInt("GPUs", &s.gpus, 8, 64);
    s.gpus = std::clamp(s.gpus, 1, 16384);
    ImGui::SameLine(0, em(18));
    ImGui::SetNextItemWidth(em(100));
    ImGui::InputInt("global batch", &s.global_batch, 64, 512);
    s.global_batch = std::clamp(s.global_batch, 0, 1 << 22);
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip("sequences per optimizer step (0: one micro-batch per data-parallel rank)");
    ImGui::SameLine(0, em(18));
    ImGui::BeginDisabled(s.searching());
    if (ImGui::Button(s.searching() ? "planning..." : "Plan")) s.start();
    ImGui::EndDisabled();
    if (!s.error.empty()) {
        ImGui::PushTextWrapPos(0);
        ImGui::TextColored(ImVec4(1, 0.5f, 0.45f, 1), "%s", s.error.c_str());
        ImGui::PopTextWrapPos();
    }
}

// The ranked layouts (the first 200), one selectable row each.
void draw_ranked(PlannerState& s) {
    const auto& ranked = s.result->search.ranked;
    const int rows = int(std::min<size_t>(ranked.size(), 200));
    if (!begin_wide_table("plans", 8, 0)) return;
    for (const char* h : {"#", "layout", "fits", "memory/GPU", "step", "tokens/s", "MFU", "verdict"})
        ImGui::TableSetupColumn(h);
    ImGui::TableSetupScrollFreeze(2, 1);
    ImGui::TableHeadersRow();
    for (int i = 0; i < rows; ++i) {
        const predict::PlanResult& r = ranked[size_t(i)];
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        if (ImGui::Selectable(fmt::format("{}", i + 1).c_str(), s.selected == i, ImGuiSelectableFlags_SpanAllColumns))
            s.selected = i;
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(r.layout.describe().c_str());
        ImGui::TableNextColumn();
        ImGui::TextColored(r.fits ? ImVec4(0.45f, 0.85f, 0.5f, 1) : ImVec4(1, 0.5f, 0.45f, 1), r.fits ? "yes" : "no");
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(format_bytes(r.memory.total()).c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(seconds(r.time.step_s).c_str());
        ImGui::TableNextColumn();
        ImGui::Text("%.0f", r.tokens_per_s);
        ImGui::TableNextColumn();
        ImGui::Text("%.1f%%", 100 * r.mfu);
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(r.verdict.c_str());
    }
    ImGui::EndTable();
}

// The selected layout: its memory, time and schedule, and what can be done with it (show it, launch it here).
void draw_selected(AppState& app, PlannerState& s) {
    const PlannerState::Plan& p = *s.result;
    const predict::PlanResult& r = p.search.ranked[size_t(s.selected)];
    ImGui::Separator();
    ImGui::Text("Layout %d: %s", s.selected + 1, r.layout.describe().c_str());
    draw_memory(p, r);
    draw_time(r);
    draw_schedule(r);
    if (ImGui::Button("Show its predicted step in the views")) app.show_planned(size_t(s.selected));
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "the timeline, overlap, memory and schedule views draw this layout's step as the planner's model\n"
            "places it: one rank per pipeline stage (tp, cp, dp and ep index 0), every figure marked predicted;\n"
            "`ultrascope plan ... --trace-out FILE` writes the same as a trace file");
    if (runnable_here(p.model, r)) {
        ImGui::SameLine();
        ImGui::BeginDisabled(app.source.running());
        if (ImGui::Button("Launch it on this machine")) app.launch_planned(size_t(s.selected));
        ImGui::EndDisabled();
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip(
                "ultrascope run --preset %s %s\nthe measured run appears in the other views, next to "
                "what the engine's walk predicts for it",
                p.model.name.c_str(), r.layout.flags().c_str());
    }
}

}  // namespace

void draw_planner_view(AppState& app) {
    PlannerState& s = app.planner;
    draw_question(s, app.views.planner);
    if (!s.result) {
        ImGui::TextWrapped(
            "Every valid layout of the model on the GPUs: memory per GPU (predicted by the engine's walk "
            "for this engine's models, by the formulas of docs/planner.md for others), step time from the "
            "step-time model, MFU. Nothing runs: these are predictions.");
        return;
    }
    const PlannerState::Plan& p = *s.result;
    ImGui::TextColored(ImVec4(0.7f, 0.7f, 0.7f, 1),
                       "%s (%.2fB parameters) on %lld x %s: %lld layouts evaluated, %zu shown (predicted)",
                       p.model.name.c_str(), double(p.model.num_params()) / 1e9, (long long)s.gpus,
                       p.cluster.name.c_str(), (long long)p.search.considered, p.search.ranked.size());
    ImGui::BeginChild("layouts", ImVec2(0, ImGui::GetContentRegionAvail().y * 0.45f));
    draw_ranked(s);
    ImGui::EndChild();
    if (s.selected < 0 || s.selected >= int(p.search.ranked.size())) return;
    draw_selected(app, s);
    draw_launched(app, s);
}

}  // namespace us::gui
