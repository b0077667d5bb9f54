// The runs of this session side by side: the settings that differ, then peak memory, step time, overlap,
// tokens/s, MFU and final loss, all measured. The run on screen now is the last column.
#include <fmt/format.h>
#include <imgui.h>

#include "app/gui/model/compare_model.h"
#include "app/gui/widgets/theme.h"
#include "app/gui/views/views.h"
#include "common/core/format.h"
#include "common/core/memory_category.h"

namespace us::gui {

void draw_compare_view(AppState& app) {
    std::vector<RunSummary> runs = app.comparison.runs;
    if (app.store() && app.store()->rank_count() > 0 &&
        (app.source.running() || app.source.kind() == Source::attached)) {
        const double loss = app.derived.training().empty() ? 0 : app.derived.training().back().loss;
        runs.push_back(summarize_run(app.report(), app.source.label() + " (now)", "", loss));
    }
    if (runs.empty()) {
        ImGui::TextColored(ImVec4(0.7f, 0.7f, 0.7f, 1),
                           "finished runs appear here; change a setting and relaunch to compare");
        return;
    }
    if (ImGui::SmallButton("clear")) app.comparison.runs.clear();
    const size_t first = runs.size() > 5 ? runs.size() - 5 : 0;  // the last five
    const int cols = int(runs.size() - first) + 1;
    if (!ImGui::BeginTable("compare", cols,
                           ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_ScrollX))
        return;
    ImGui::TableSetupColumn("", ImGuiTableColumnFlags_WidthFixed, 120);
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
    const std::vector<RunSummary> shown(runs.begin() + std::ptrdiff_t(first), runs.end());
    for (const std::string& key : differing_settings(shown))
        row(key.c_str(),
            [&](const RunSummary& r) { return r.config.contains(key) ? r.config[key].dump() : std::string("-"); });
    row("status", [](const RunSummary& r) { return r.status; });
    row("peak memory", [](const RunSummary& r) { return format_bytes(r.peak_total); });
    for (int k : {0, 1, 2, 3, 4, 6})
        row(std::string(kMemCategoryNames[size_t(k)]).c_str(),
            [k](const RunSummary& r) { return format_bytes(r.peak_bytes[size_t(k)]); });
    row("step time", [](const RunSummary& r) { return fmt::format("{:.1f} ms", r.step_ms); });
    row("overlap", [](const RunSummary& r) { return fmt::format("{:.1f}%", r.overlap_pct); });
    row("tokens/s", [](const RunSummary& r) { return fmt::format("{:.0f}", r.tokens_per_s); });
    row("MFU", [](const RunSummary& r) { return fmt::format("{:.1f}%", 100 * r.mfu); });
    row("final loss", [](const RunSummary& r) { return fmt::format("{:.4f}", r.final_loss); });
    ImGui::EndTable();
    ImGui::TextColored(ImVec4(0.65f, 0.65f, 0.65f, 1), "all figures measured (peaks: the largest rank)");
}

}  // namespace us::gui
