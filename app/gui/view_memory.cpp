// The memory anatomy: for the selected rank, bytes by category stacked over time (params at the bottom,
// transient categories on top) over forward / backward / optimizer bands and step marks, a hover readout, the peak
// of each category measured beside its prediction, and step 1 against a steady step.
#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>

#include "app/gui/model/memory_model.h"
#include "app/gui/theme.h"
#include "app/gui/views.h"
#include "engine/core/allocator.h"

namespace us::gui {

namespace {

void draw_stack(AppState& app, const prof::RankTrace& rank, const prof::RankReport* rr, float height) {
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    const float axis_w = 64;
    const float w = std::max(80.0f, ImGui::GetContentRegionAvail().x - axis_w);
    const ImVec2 a0(p0.x + axis_w, p0.y), a1(a0.x + w, p0.y + height);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    dl->AddRectFilled(a0, a1, IM_COL32(18, 20, 26, 255));
    ImGui::InvisibleButton("memory_plot", ImVec2(w + axis_w, height));
    const bool hovered = ImGui::IsItemHovered();

    const int64_t t0 = app.view_t0, t1 = app.view_t1;
    const auto& tl = app.memory_timeline(rank.rank);
    const int width = int(w);
    const auto cols = build_memory_columns(tl, t0, t1, width);
    int64_t ymax = 1;
    for (const auto& c : cols) ymax = std::max(ymax, c.total);
    if (rr) ymax = std::max(ymax, rr->predicted.memory_total());
    const double yscale = (height - 4) / double(ymax);

    // forward / backward / optimizer bands, then the stack, then step marks
    for (const auto& b : phase_bands(rank, t0, t1)) {
        const float x0 = a0.x + float(double(std::max(b.begin, t0) - t0) / double(t1 - t0) * w);
        const float x1 = a0.x + float(double(std::min(b.end, t1) - t0) / double(t1 - t0) * w);
        dl->AddRectFilled(ImVec2(x0, a0.y), ImVec2(std::max(x0 + 1, x1), a1.y), phase_color(b.phase, 0.10f));
    }
    for (int x = 0; x < width; ++x) {
        const MemoryColumn& c = cols[size_t(x)];
        if (!c.has_data) continue;
        double base = 0;
        for (int k = 0; k < kMemCategoryCount; ++k) {
            if (c.bytes[size_t(k)] <= 0) continue;
            const float ya = a1.y - float(base * yscale), yb = a1.y - float((base + double(c.bytes[size_t(k)])) * yscale);
            dl->AddRectFilled(ImVec2(a0.x + x, yb), ImVec2(a0.x + x + 1, ya), category_color(k, 0.9f));
            base += double(c.bytes[size_t(k)]);
        }
    }
    float last_label = -1e9f;
    for (const auto& [t, step] : step_marks(rank, t0, t1)) {
        const float x = a0.x + float(double(t - t0) / double(t1 - t0) * w);
        dl->AddLine(ImVec2(x, a0.y), ImVec2(x, a1.y), IM_COL32(255, 255, 255, 60));
        if (x - last_label > 60) {  // labels only where they fit
            dl->AddText(ImVec2(x + 3, a0.y + 2), kTextDim, fmt::format("step {}", step).c_str());
            last_label = x;
        }
    }
    // predicted total as a dashed line
    if (rr) {
        const float y = a1.y - float(double(rr->predicted.memory_total()) * yscale);
        for (float x = a0.x; x < a1.x; x += 10) dl->AddLine(ImVec2(x, y), ImVec2(std::min(x + 5, a1.x), y), IM_COL32(255, 255, 255, 140));
        const char* label = "predicted peak";
        dl->AddText(ImVec2(a1.x - ImGui::CalcTextSize(label).x - 4, y + 2), kTextDim, label);
    }
    // y axis
    for (int i = 0; i <= 4; ++i) {
        const double v = double(ymax) * i / 4;
        const float y = a1.y - float(v * yscale);
        dl->AddLine(ImVec2(a0.x - 4, y), ImVec2(a0.x, y), kTextDim);
        dl->AddText(ImVec2(p0.x, y - 8), kTextDim, format_bytes(int64_t(v)).c_str());
    }
    dl->AddRect(a0, a1, IM_COL32(70, 70, 80, 255));

    // zoom and pan, shared with the timeline
    const ImGuiIO& io = ImGui::GetIO();
    if (hovered) {
        const int64_t t_mouse = t0 + int64_t(double(io.MousePos.x - a0.x) / w * double(t1 - t0));
        if (io.MouseWheel != 0) app.zoom(io.MouseWheel > 0 ? 0.8 : 1.25, t_mouse);
        if (ImGui::IsMouseDragging(ImGuiMouseButton_Left))
            app.pan(-int64_t(double(io.MouseDelta.x) / w * double(t1 - t0)));
        if (!io.WantTextInput && ImGui::IsKeyPressed('F')) app.fit_step(app.step_at(t_mouse));
        if (!io.WantTextInput && ImGui::IsKeyPressed('A')) app.fit_all();
        // readout
        const int x = int(io.MousePos.x - a0.x);
        if (x >= 0 && x < width && cols[size_t(x)].has_data) {
            const MemoryColumn& c = cols[size_t(x)];
            dl->AddLine(ImVec2(io.MousePos.x, a0.y), ImVec2(io.MousePos.x, a1.y), IM_COL32(255, 255, 255, 120));
            ImGui::BeginTooltip();
            ImGui::Text("step %d, %s (measured)", c.step, std::string(prof::kPhaseNames[size_t(c.phase)]).c_str());
            for (int k = kMemCategoryCount - 1; k >= 0; --k)
                if (c.bytes[size_t(k)] > 0) {
                    legend_item(category_color(k), fmt::format("{:<16} {}", kMemCategoryNames[size_t(k)],
                                                              format_bytes(c.bytes[size_t(k)])).c_str());
                }
            ImGui::Text("total            %s", format_bytes(c.total).c_str());
            ImGui::EndTooltip();
        }
    }
}

void draw_peaks(const prof::RankReport& r) {
    if (!ImGui::BeginTable("peaks", 5, ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingStretchProp))
        return;
    ImGui::TableSetupColumn("category");
    ImGui::TableSetupColumn("peak (measured)");
    ImGui::TableSetupColumn("predicted");
    ImGui::TableSetupColumn("at");
    ImGui::TableSetupColumn("step 1 / steady");
    ImGui::TableHeadersRow();
    for (int k = 0; k < kMemCategoryCount; ++k) {
        const auto& pred = r.predicted.memory[size_t(k)];
        if (r.memory.peak[size_t(k)] == 0 && (!pred || *pred == 0)) continue;
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        legend_item(category_color(k), std::string(kMemCategoryNames[size_t(k)]).c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(format_bytes(r.memory.peak[size_t(k)]).c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(pred ? format_bytes(*pred).c_str() : "not modelled");
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(std::string(prof::kPhaseNames[size_t(r.memory.peak_phase[size_t(k)])]).c_str());
        ImGui::TableNextColumn();
        ImGui::Text("%s / %s", format_bytes(r.memory.step1_peak[size_t(k)]).c_str(),
                    r.memory.has_steady ? format_bytes(r.memory.steady_peak[size_t(k)]).c_str() : "-");
    }
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted("total");
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(format_bytes(r.memory.total_peak).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(format_bytes(r.predicted.memory_total()).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(std::string(prof::kPhaseNames[size_t(r.memory.total_peak_phase)]).c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%s / %s", format_bytes(r.memory.step1_total_peak).c_str(),
                r.memory.has_steady ? format_bytes(r.memory.steady_total_peak).c_str() : "-");
    ImGui::EndTable();
}

}  // namespace

void draw_memory_view(AppState& app) {
    const prof::TraceStore* store = app.store();
    if (!store || store->rank_count() == 0) {
        ImGui::TextColored(ImVec4(0.7f, 0.7f, 0.7f, 1), "no data yet");
        return;
    }
    const auto ranks = store->ranks();
    if (std::find(ranks.begin(), ranks.end(), app.selected_rank) == ranks.end()) app.selected_rank = ranks.front();
    const prof::RankReport* rr = nullptr;
    for (const auto& r : app.report().ranks)
        if (r.rank == app.selected_rank) rr = &r;
    ImGui::SetNextItemWidth(200);
    if (ImGui::BeginCombo("rank", rr ? rr->label.c_str() : fmt::format("rank {}", app.selected_rank).c_str())) {
        for (const auto& r : app.report().ranks)
            if (ImGui::Selectable(r.label.c_str(), r.rank == app.selected_rank)) app.selected_rank = r.rank;
        ImGui::EndCombo();
    }
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(0.65f, 0.65f, 0.65f, 1), "measured; dashed: predicted");
    ImGui::PushFont(small_font());
    for (int k = 0, shown = 0; k < kMemCategoryCount; ++k) {
        if (rr && rr->memory.peak[size_t(k)] == 0) continue;
        if (shown++ > 0) ImGui::SameLine();
        legend_item(category_color(k), std::string(kMemCategoryNames[size_t(k)]).c_str());
    }
    ImGui::PopFont();
    const float table_h = ImGui::GetTextLineHeightWithSpacing() * 10;
    const float plot_h = std::max(80.0f, ImGui::GetContentRegionAvail().y - table_h);
    draw_stack(app, *store->rank(app.selected_rank), rr, plot_h);
    if (rr) draw_peaks(*rr);
}

}  // namespace us::gui
