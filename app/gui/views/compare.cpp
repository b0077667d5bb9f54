// The runs of this session side by side: the settings that differ, then peak memory, step time, overlap,
// tokens/s, MFU and final loss, all measured. The run on screen now is the last column. Below, two kept runs' diff:
// a waterfall from A's step to B's, one clickable bar per cause (docs/diff.md).
#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <optional>

#include "app/gui/model/compare_model.h"
#include "app/gui/model/diff_waterfall.h"
#include "app/gui/widgets/theme.h"
#include "app/gui/views/views.h"
#include "common/core/check.h"
#include "common/core/format.h"
#include "profiler/diff/diff_load.h"
#include "common/core/memory_category.h"

namespace us::gui {

namespace {

// What the waterfall shows: the pair of kept runs compared, their diff (made when the pair changes) and the bar
// clicked, whose evidence is listed below it.
struct DiffPick {
    int a = 0, b = 0;  // run numbers (1-based)
    size_t runs = 0;
    bool pinned = false;  // picked by the user (or A run again): kept as runs come; else the last two
    std::optional<prof::RunDiff> diff;
    std::string why;
    int selected = -1;
};

void draw_evidence(const prof::Cause& c) {
    ImGui::TextWrapped("%s", c.evidence.c_str());
    if (c.rank) ImGui::Text("rank %d%s%s", *c.rank, c.group.empty() ? "" : ", group ", c.group.c_str());
    for (const prof::CauseOp& o : c.ops)
        ImGui::BulletText("%s: %.3f -> %.3f ms (%s)", o.name.c_str(), o.a_ms, o.b_ms, o.match.c_str());
}

// One row a bar: its label, then the bar from its start to its end on a scale common to all, clickable.
void draw_waterfall(DiffPick& pick) {
    const prof::RunDiff& d = *pick.diff;
    ImGui::TextWrapped("%s", d.verdict.c_str());
    const std::vector<WaterfallBar> bars = waterfall_bars(d);
    double top = 0;
    for (const WaterfallBar& b : bars) top = std::max({top, b.from_ms, b.to_ms});
    const float label_w = 260, width = std::max(120.0f, ImGui::GetContentRegionAvail().x - label_w - 90);
    ImDrawList* draw = ImGui::GetWindowDrawList();
    for (size_t i = 0; i < bars.size(); ++i) {
        const WaterfallBar& b = bars[i];
        ImGui::PushID(int(i));
        ImGui::TextUnformatted(b.label.c_str());
        ImGui::SameLine(label_w);
        const ImVec2 at = ImGui::GetCursorScreenPos();
        const float h = ImGui::GetTextLineHeight();
        const bool clicked = ImGui::InvisibleButton("bar", ImVec2(width, h));
        const float x0 = at.x + float(std::min(b.from_ms, b.to_ms) / std::max(top, 1e-9)) * width;
        const float x1 = at.x + float(std::max(b.from_ms, b.to_ms) / std::max(top, 1e-9)) * width;
        const bool step = b.label == "A's step" || b.label == "B's step";
        const ImU32 color = step                   ? IM_COL32(120, 120, 140, 255)
                            : b.to_ms >= b.from_ms ? IM_COL32(210, 90, 80, 255)    // slower
                                                   : IM_COL32(80, 170, 110, 255);  // faster
        draw->AddRectFilled(ImVec2(x0, at.y), ImVec2(std::max(x1, x0 + 1), at.y + h), color);
        if (b.cause >= 0 && b.cause == pick.selected)
            draw->AddRect(ImVec2(x0, at.y), ImVec2(x1 + 1, at.y + h), IM_COL32_WHITE);
        ImGui::SameLine();
        ImGui::Text(step ? "%.2f ms" : "%+.2f ms", step ? b.to_ms : b.to_ms - b.from_ms);
        if (ImGui::IsItemHovered() || ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenBlockedByActiveItem))
            ImGui::SetTooltip("%s", b.source.c_str());
        if (clicked && b.cause >= 0) pick.selected = pick.selected == b.cause ? -1 : b.cause;
        ImGui::PopID();
    }
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.65f, 0.65f, 0.65f, 1));
    ImGui::TextWrapped(
        "steps measured; causes measured or derived (straggler); noise %.2f ms, %s%s; click a bar for its ops and "
        "ranks",
        d.noise_ms, prof::noise_words(d).c_str(),
        d.repeats.empty() ? " (keep another run of A's or B's settings to see the noise between runs)" : "");
    ImGui::PopStyleColor();
    if (d.settings) ImGui::TextWrapped("settings changed: %s", prof::describe_changes(*d.settings).c_str());
    if (const std::string comm = prof::communication_words(d); !comm.empty()) ImGui::TextWrapped("%s", comm.c_str());
    if (d.a_core_wait && d.b_core_wait)
        ImGui::TextWrapped(
            "waited for a core a step (measured; inside the bars: the rank's own threads and the machine's other load "
            "take cores): A %.2f ms (rank %d the most, %.2f ms), B %.2f ms (rank %d the most, %.2f ms)%s",
            d.a_core_wait->mean_ms, d.a_core_wait->most_rank, d.a_core_wait->most_ms, d.b_core_wait->mean_ms,
            d.b_core_wait->most_rank, d.b_core_wait->most_ms, prof::load_clause(d).c_str());  // the verdict's words
    if (d.a_core_wait && d.b_core_wait && d.a_core_wait->workers_mean_ms >= 0 && d.b_core_wait->workers_mean_ms >= 0)
        ImGui::TextWrapped(
            "their OpenMP workers waited for a core a step, summed over them (measured): A %.2f ms, B "
            "%.2f ms (the ranks' mean; at most what it cost them)",
            d.a_core_wait->workers_mean_ms, d.b_core_wait->workers_mean_ms);
    if (pick.selected >= 0 && size_t(pick.selected) < d.causes.size()) draw_evidence(d.causes[size_t(pick.selected)]);
    for (const prof::WhatIf& w : d.what_if)
        ImGui::Text("derived (first-order), %s: %.2f ms per step", w.name.c_str(), w.step_ms);
}

// The two kept runs to compare (the last two at first), and their diff as a waterfall from A's step to B's. "Run A's
// settings again" launches A's settings here; the run, once kept, is one of the diff's repeats (the noise between
// runs), and the pair stays as it was.
void draw_diff(AppState& app, const std::vector<RunSummary>& kept) {
    static DiffPick pick;
    if (kept.size() < 2) return;
    if (pick.runs != kept.size()) {
        const int n = int(kept.size());
        const bool keep = pick.pinned && pick.a >= 1 && pick.a <= n && pick.b >= 1 && pick.b <= n;
        pick = keep ? DiffPick{pick.a, pick.b, kept.size(), true} : DiffPick{n - 1, n, kept.size()};
    }
    ImGui::Separator();
    ImGui::TextUnformatted("What changed: B's step against A's, cause by cause");
    const int a = pick.a, b = pick.b;  // run numbers, as the table's columns
    ImGui::SetNextItemWidth(160);
    ImGui::SliderInt("A", &pick.a, 1, int(kept.size()), "run %d");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(160);
    ImGui::SliderInt("B", &pick.b, 1, int(kept.size()), "run %d");
    if (a != pick.a || b != pick.b) pick.diff.reset(), pick.why.clear(), pick.selected = -1, pick.pinned = true;
    const RunSummary& run_a = kept[size_t(pick.a - 1)];
    // offered while nothing is going (a run, or an attached job the launch would end)
    if (run_a.config.is_object() && !app.source.running() && app.source.kind() != Source::attached) {
        ImGui::SameLine();
        if (ImGui::SmallButton("run A's settings again")) {
            try {
                app.settings = app.settings.rerun(run_a.config);
                app.launch();
                pick.pinned = true;
            } catch (const UserError& e) {
                app.log.fail(std::string("cannot run A's settings again: ") + e.what());
            }
        }
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip(
                "A second run of A's settings measures how far this machine moves between runs: the "
                "diff's noise then holds it");
    }
    if (!pick.diff && pick.why.empty())
        pick.diff = diff_summaries(kept, size_t(pick.a - 1), size_t(pick.b - 1), pick.why);
    if (pick.diff)
        draw_waterfall(pick);
    else
        ImGui::TextColored(ImVec4(0.9f, 0.6f, 0.3f, 1), "no diff: %s", pick.why.c_str());
}

}  // namespace

void draw_compare_view(AppState& app) {
    std::vector<RunSummary> runs = app.comparison.runs;
    if (app.store() && app.store()->rank_count() > 0 &&
        (app.source.running() || app.source.kind() == Source::attached)) {
        const double loss = app.derived.training().empty() ? 0 : app.derived.training().back().loss;
        runs.push_back(summarize_run(app.report(), app.source.label() + " (now)", "", loss, false));
    }
    if (runs.empty()) {
        ImGui::TextColored(ImVec4(0.7f, 0.7f, 0.7f, 1),
                           "finished runs appear here; change a setting and relaunch to compare");
        return;
    }
    if (ImGui::SmallButton("clear")) app.comparison.runs.clear();
    const size_t first = runs.size() > 5 ? runs.size() - 5 : 0;  // the last five
    const int cols = int(runs.size() - first) + 1;
    const std::vector<RunSummary> shown(runs.begin() + std::ptrdiff_t(first), runs.end());
    const std::vector<DifferingSetting> differing = differing_settings(shown);
    // A scrolling table fills the window's height unless told its own: sized to its rows, the diff below shows.
    const int rows = 1 + int(differing.size()) + 2 + 6 + 5;
    const float row_h = ImGui::GetTextLineHeight() + 2 * ImGui::GetStyle().CellPadding.y;
    const float height = row_h * float(rows + 1) + ImGui::GetStyle().ScrollbarSize + 4;
    if (!ImGui::BeginTable("compare", cols,
                           ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_ScrollX,
                           ImVec2(0, height)))
        return;
    ImGui::TableSetupColumn("", ImGuiTableColumnFlags_WidthFixed, em(120));  // the row names, at any font
    for (size_t i = first; i < runs.size(); ++i) ImGui::TableSetupColumn(fmt::format("run {}", i + 1).c_str());
    ImGui::TableHeadersRow();
    auto row = [&](const char* name, auto cell) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(name);
        for (size_t i = first; i < runs.size(); ++i) {
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(cell(runs[i]).c_str());
        }
    };
    row("run", [](const RunSummary& r) { return r.label; });
    for (const DifferingSetting& d : differing) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(d.key.c_str());
        for (const std::string& value : d.values) {
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(value.c_str());
        }
    }
    row("status", [](const RunSummary& r) { return r.status; });
    row("peak memory", [](const RunSummary& r) { return format_bytes(r.peak_total); });
    for (int k : {0, 1, 2, 3, 4, 6})
        row(std::string(kMemCategoryNames[size_t(k)]).c_str(),
            [k](const RunSummary& r) { return format_bytes(r.peak_bytes[size_t(k)]); });
    // Named apart from the settings above ("overlap" is also a setting) and with what they are taken over.
    row("slowest step", [](const RunSummary& r) { return fmt::format("{:.1f} ms", r.step_ms); });
    row("comm hidden", [](const RunSummary& r) { return fmt::format("{:.1f}%", r.overlap_pct); });
    row("tokens/s", [](const RunSummary& r) { return fmt::format("{:.0f}", r.tokens_per_s); });
    row("MFU (derived)", [](const RunSummary& r) { return fmt::format("{:.1f}%", 100 * r.mfu); });
    row("final loss", [](const RunSummary& r) { return fmt::format("{:.4f}", r.final_loss); });
    ImGui::EndTable();
    ImGui::TextColored(ImVec4(0.65f, 0.65f, 0.65f, 1),
                       "measured, MFU derived; peaks: the largest rank's; slowest step: each steady step's slowest "
                       "rank, averaged over the steps (the report's step; the diff below takes the ranks' mean); "
                       "comm hidden: the share of communication under compute, the ranks' mean");
    draw_diff(app, app.comparison.runs);
}

}  // namespace us::gui
