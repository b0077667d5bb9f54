// The memory categories over time of an imported PyTorch run as a stacked plot over the timeline's window: measured
// by the memory profiler (prof.export_memory_timeline's file in the run's folder or beside its trace file), or else
// inferred from the ops around each [memory] event, with how often the two agree. Read on a worker by
// app.views.memory_categories (state/memory_categories.h).
#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <filesystem>

#include "profiler/import/memory_categories.h"
#include "app/gui/state/app_state.h"
#include "app/gui/widgets/theme.h"
#include "app/gui/widgets/memory_categories.h"
#include "common/core/check.h"
#include "common/core/format.h"

namespace us::gui {

namespace {

constexpr ImU32 kCategoryColors[prof::kProfilerCategories] = {
    IM_COL32(60, 150, 80, 255), IM_COL32(215, 170, 40, 255), IM_COL32(150, 150, 150, 255), IM_COL32(160, 130, 220, 255),
    IM_COL32(220, 80, 70, 255), IM_COL32(70, 110, 220, 255), IM_COL32(100, 160, 235, 255), IM_COL32(95, 95, 105, 255)};

// One pixel column's state: the row with the largest total in its slice, else the row in force at its start.
void draw_stack(std::vector<int64_t>& pick, const prof::MemoryTimeline& t, int64_t off, const char* basis, int64_t t0,
                int64_t t1, ImVec2 p0, float w, float h) {
    ImDrawList* dl = ImGui::GetWindowDrawList();
    dl->AddRectFilled(p0, ImVec2(p0.x + w, p0.y + h), IM_COL32(18, 20, 26, 255));
    const auto& times = t.times_us;
    const int columns = std::max(1, int(w));
    pick.assign(size_t(columns), -1);
    int64_t ymax = 1;
    auto row_at = [&](int64_t t_store) {  // the last row at or before t (store ns), -1 before the first
        const int64_t us = (t_store - off) / 1000;
        return int64_t(std::upper_bound(times.begin(), times.end(), us) - times.begin()) - 1;
    };
    for (int c = 0; c < columns; ++c) {
        const int64_t a = t0 + int64_t(double(t1 - t0) * c / columns),
                      b = t0 + int64_t(double(t1 - t0) * (c + 1) / columns);
        int64_t best = row_at(a), best_total = best >= 0 ? t.total(size_t(best)) : -1;
        for (int64_t i = best + 1; i >= 0 && i < int64_t(times.size()) && times[size_t(i)] * 1000 + off < b; ++i)
            if (const int64_t tot = t.total(size_t(i)); tot > best_total) best = i, best_total = tot;
        pick[size_t(c)] = best;
        ymax = std::max(ymax, best_total);
    }
    const float colw = w / float(columns);
    for (int c = 0; c < columns; ++c) {
        if (pick[size_t(c)] < 0) continue;
        float y = p0.y + h;
        for (size_t k = 0; k < prof::kProfilerCategories; ++k) {
            const int64_t v = std::max<int64_t>(0, t.at(size_t(pick[size_t(c)]), prof::ProfilerCategory(k)));
            const float dy = float(double(v) / double(ymax) * (h - 4));
            if (dy <= 0) continue;
            dl->AddRectFilled(ImVec2(p0.x + c * colw, y - dy), ImVec2(p0.x + (c + 1) * colw, y), kCategoryColors[k]);
            y -= dy;
        }
    }
    dl->AddText(ImVec2(p0.x + 4, p0.y + 2), kTextDim, format_bytes(ymax).c_str());
    ImGui::InvisibleButton("memory_categories_plot", ImVec2(w, h));
    if (ImGui::IsItemHovered()) {
        const int c = std::clamp(int((ImGui::GetIO().MousePos.x - p0.x) / colw), 0, columns - 1);
        if (const int64_t row = pick[size_t(c)]; row >= 0) {
            ImGui::BeginTooltip();
            ImGui::Text("%s total (%s), %.3f ms into the timeline", format_bytes(t.total(size_t(row))).c_str(), basis,
                        double(times[size_t(row)] - times.front()) / 1000.0);
            for (size_t k = prof::kProfilerCategories; k-- > 0;)
                ImGui::TextColored(ImColor(kCategoryColors[k]), "%-16s %s",
                                   prof::profiler_category_label(prof::ProfilerCategory(k)),
                                   format_bytes(t.at(size_t(row), prof::ProfilerCategory(k))).c_str());
            ImGui::EndTooltip();
        }
    }
}

}  // namespace

void draw_memory_categories(AppState& app, const prof::RankTrace& rank) {
    MemoryCategories& categories = app.views.memory_categories;
    const MemoryCategories::Read* loaded = categories.of(*app.store(), app.source, app.log);
    if (!loaded) return void(ImGui::TextColored(ImColor(kTextDim), "reading the memory profiler's timeline ..."));
    const prof::RankMemoryCategories* r = nullptr;
    for (const auto& x : loaded->ranks)
        if (x.rank == rank.rank) r = &x;
    if (!r) {
        ImGui::TextColored(ImColor(kTextDim), "%s",
                           loaded->error.empty()
                               ? "categories: unknown for this rank (no [memory] events to infer them from, no memory "
                                 "profiler timeline beside the trace: docs/pytorch-memory.md)"
                               : loaded->error.c_str());
        return;
    }
    const bool inferred = !r->measured || (categories.show_inferred && r->inferred);
    if (r->measured && r->inferred) {
        ImGui::Checkbox("show the inferred categories instead", &categories.show_inferred);
        ImGui::SameLine();
    }
    const prof::MemoryTimeline& t = inferred ? *r->inferred : r->timeline;
    const prof::TimelinePeaks& peaks = inferred ? r->inferred_peaks : r->peaks;
    if (inferred)
        ImGui::TextColored(ImColor(kWarnColor),
                           "categories over time INFERRED from the ops around each [memory] event "
                           "(%s): bytes allocated since profiling began; peak %s",
                           prof::device_label(r->device).c_str(), format_bytes(peaks.total_peak_bytes).c_str());
    else
        ImGui::TextColored(ImColor(kTextDim), "categories over time, measured by the memory profiler (%s, %s); peak %s",
                           std::filesystem::path(r->timeline.source).filename().string().c_str(),
                           prof::device_label(r->device).c_str(), format_bytes(peaks.total_peak_bytes).c_str());
    if (r->grouped && r->strict) {
        ImGui::TextColored(ImColor(kTextDim),
                           "inferred from the ops around each [memory] event, the categories agree "
                           "on %.1f%% of the byte-time (%.1f%% with autograd detail apart from "
                           "gradients), %.1f%% at the peak (derived)",
                           100 * r->grouped->byte_time, 100 * r->strict->byte_time, 100 * r->grouped->at_peak);
    }
    if (!r->offset_ns || t.size() == 0) {
        for (const auto& n : r->notes) ImGui::TextWrapped("%s", n.c_str());
        return;
    }
    const int64_t t0 = app.window.t0, t1 = std::max(app.window.t0 + 1, app.window.t1);
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    const float w = std::max(80.0f, ImGui::GetContentRegionAvail().x - 4);
    draw_stack(categories.pick, t, *r->offset_ns, inferred ? "inferred" : "measured", t0, t1, p0, w,
               std::max(90.0f, ImGui::GetContentRegionAvail().y * 0.35f));
    for (size_t k = 0, shown = 0; k < prof::kProfilerCategories; ++k) {
        if (peaks.peak_bytes[k] <= 0) continue;
        if (shown++ > 0) ImGui::SameLine();
        legend_item(kCategoryColors[k], prof::profiler_category_label(prof::ProfilerCategory(k)));
    }
}

}  // namespace us::gui
