// The memory view of an imported PyTorch run: what torch.profiler(profile_memory=True) recorded as `[memory]`
// events, the caching allocator's allocated and reserved bytes per device after each allocation or free (measured),
// over the timeline's window with step marks, and each step's peak; below them the categories over time
// (memory_categories.h: the memory profiler's, measured, or inferred from the ops; docs/pytorch-memory.md).
#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <map>

#include "app/gui/state/app_state.h"
#include "app/gui/widgets/theme.h"
#include "app/gui/widgets/imported_memory.h"
#include "app/gui/widgets/memory_categories.h"
#include "common/core/format.h"
#include "profiler/trace/kineto_counters.h"

namespace us::gui {

namespace {

struct Series {
    const char* counter;
    const char* label;
    ImU32 color;
};
constexpr Series kSeries[] = {{prof::kKinetoReservedCounter, "GPU reserved", IM_COL32(230, 200, 90, 255)},
                              {prof::kKinetoAllocatedCounter, "GPU allocated", IM_COL32(90, 160, 230, 255)},
                              {prof::kKinetoCpuAllocatedCounter, "CPU allocated", IM_COL32(140, 200, 120, 255)}};

const std::vector<prof::CounterPoint>* series_of(const prof::TraceStore& store, const prof::RankTrace& rank,
                                                 const char* counter) {
    const uint32_t id = store.find_name(counter);
    if (id == UINT32_MAX) return nullptr;
    const auto it = rank.counters.find(id);
    return it == rank.counters.end() || it->second.empty() ? nullptr : &it->second;
}

using Shown = std::vector<std::pair<const Series*, const std::vector<prof::CounterPoint>*>>;

// The series over the time window as step lines (each value holds until the next event), with the host lane's step
// marks, the scale at its top and the legend below.
void draw_series(const AppState& app, const prof::RankTrace& rank, const Shown& shown) {
    const int64_t t0 = app.window.t0, t1 = std::max(app.window.t0 + 1, app.window.t1);
    int64_t ymax = 1;  // over the window's points only, found by binary search (points are in time order)
    for (const auto& [s, points] : shown) {
        auto it = std::lower_bound(points->begin(), points->end(), t0,
                                   [](const prof::CounterPoint& p, int64_t t) { return p.t < t; });
        for (; it != points->end() && it->t <= t1; ++it) ymax = std::max(ymax, int64_t(it->value));
    }
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    const float w = std::max(80.0f, ImGui::GetContentRegionAvail().x - 4);
    const float h = std::max(100.0f, ImGui::GetContentRegionAvail().y * 0.3f);
    dl->AddRectFilled(p0, ImVec2(p0.x + w, p0.y + h), IM_COL32(18, 20, 26, 255));
    auto x_of = [&](int64_t t) { return p0.x + float(double(t - t0) / double(t1 - t0) * w); };
    auto y_of = [&](double v) { return p0.y + h - float(v / double(ymax) * (h - 4)); };
    for (const auto& s : rank.lanes[size_t(prof::Lane::host)].spans())
        if (s.kind == prof::SpanKind::step && s.begin >= t0 && s.begin <= t1)
            dl->AddLine(ImVec2(x_of(s.begin), p0.y), ImVec2(x_of(s.begin), p0.y + h), kGridColor);
    for (const auto& [s, points] : shown) {
        auto first = std::lower_bound(points->begin(), points->end(), t0,
                                      [](const prof::CounterPoint& p, int64_t t) { return p.t < t; });
        if (first != points->begin()) --first;
        float px = x_of(std::max(first->t, t0)), py = y_of(first->value);
        for (auto it = first + 1; it != points->end() && it->t <= t1; ++it) {
            const float x = x_of(it->t), y = y_of(it->value);
            if (x - px >= 0.5f || std::abs(y - py) >= 1) {
                dl->AddLine(ImVec2(px, py), ImVec2(x, py), s->color, 1.5f);
                dl->AddLine(ImVec2(x, py), ImVec2(x, y), s->color, 1.5f);
                px = x, py = y;
            }
        }
        dl->AddLine(ImVec2(px, py), ImVec2(p0.x + w, py), s->color, 1.5f);
    }
    dl->AddText(ImVec2(p0.x + 4, p0.y + 2), kTextDim, format_bytes(ymax).c_str());
    ImGui::InvisibleButton("imported_memory", ImVec2(w, h));
    for (size_t i = 0; i < shown.size(); ++i) {
        if (i) ImGui::SameLine();
        legend_item(shown[i].first->color, shown[i].first->label);
    }
}

// Each step's peak per series, in a table.
void draw_step_peaks(AppState& app, const prof::TraceStore& store, const prof::RankTrace& rank, const Shown& shown) {
    // Each step's peak, per series (the step a [memory] event falls in, as the reader assigned it): computed once per
    // rank and store version, not every frame.
    ImportedMemoryState& cache = app.views.imported_memory;
    if (cache.version != store.version() || cache.rank != rank.rank) {
        cache.peaks.clear();
        for (size_t i = 0; i < shown.size(); ++i)
            for (const auto& p : *shown[i].second) {
                auto& row = cache.peaks[p.step];
                row.resize(shown.size(), 0);
                row[i] = std::max(row[i], int64_t(p.value));
            }
        cache.version = store.version(), cache.rank = rank.rank;
    }
    const auto& peaks = cache.peaks;
    if (ImGui::BeginTable("step_peaks", int(shown.size()) + 1,
                          ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_ScrollY)) {
        ImGui::TableSetupColumn("step (Kineto's)");
        for (const auto& [s, points] : shown) ImGui::TableSetupColumn(fmt::format("{} peak", s->label).c_str());
        ImGui::TableHeadersRow();
        for (const auto& [step, row] : peaks) {
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            if (step > 0)
                ImGui::Text("ProfilerStep#%d", step - 1);
            else
                ImGui::TextUnformatted("outside the steps");
            for (int64_t v : row) {
                ImGui::TableNextColumn();
                ImGui::TextUnformatted(format_bytes(v).c_str());
            }
        }
        ImGui::EndTable();
    }
}

}  // namespace

void draw_imported_memory(AppState& app, const prof::RankTrace& rank) {
    const prof::TraceStore& store = *app.store();
    Shown shown;
    for (const Series& s : kSeries)
        if (const auto* points = series_of(store, rank, s.counter)) shown.emplace_back(&s, points);
    if (shown.empty()) {
        ImGui::TextWrapped(
            "This rank's trace has no [memory] events: record with torch.profiler.profile("
            "profile_memory=True) to see allocated and reserved bytes here, or open a memory snapshot "
            "for what held them (docs/pytorch-memory.md). Categories are unknown for a PyTorch trace without them.");
        return;
    }
    ImGui::TextColored(ImColor(kTextDim),
                       "measured: the caching allocator's bytes after each allocation or free "
                       "([memory] events); below, their categories (measured by the memory profiler, else inferred)");
    draw_series(app, rank, shown);
    draw_memory_categories(app, rank);  // measured categories, when the memory profiler's timeline is beside
    draw_step_peaks(app, store, rank, shown);
}

}  // namespace us::gui
