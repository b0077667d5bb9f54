// The memory anatomy: for the selected rank, bytes by category stacked over time (params at the bottom,
// transient categories on top), the allocator's cache and the bytes no category tracks above them, over forward /
// backward / optimizer bands and step marks; a hover readout; the peak of each category measured beside its
// prediction and the textbook's formula; step 1 against a steady step.
#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <optional>

#include "app/gui/widgets/miss_marker.h"
#include "app/gui/model/memory_model.h"
#include "app/gui/widgets/theme.h"
#include "app/gui/views/views.h"
#include "app/gui/widgets/imported_memory.h"
#include "common/core/format.h"
#include "common/core/memory_category.h"

namespace us::gui {

namespace {

constexpr ImU32 kCachedColor = IM_COL32(150, 150, 165, 210);  // freed blocks the allocator keeps
constexpr ImU32 kUntrackedColor = IM_COL32(75, 78, 92, 255);  // runtime, libraries, buffers, fragmentation

// The stacked plot's frame: where it is on screen, the time window it spans and its byte scale.
struct StackPlot {
    ImDrawList* dl = nullptr;
    ImVec2 p0, a0, a1;  // the plot's corner with the axis; the drawing area's corners
    float w = 0;
    int64_t t0 = 0, t1 = 1, ymax = 1;
    double yscale = 1;
    float x_of(int64_t t) const { return a0.x + float(double(t - t0) / double(t1 - t0) * w); }
    float y_of(double bytes) const { return a1.y - float(bytes * yscale); }
};

// The pixel columns of the window, with what the process holds beyond the categories when it is shown: it can dwarf
// a small model's categories into a flat line, and then it is left out unless asked for (the table keeps its figures).
struct StackColumns {
    std::vector<MemoryColumn> cols;
    bool dwarfs = false, show_process = false;
    int64_t held_max = 0;
};

StackColumns stack_columns(AppState& app, int rank, int width) {
    StackColumns out;
    const int64_t t0 = app.window.t0, t1 = app.window.t1;
    out.cols = build_memory_columns(app.derived.memory_timeline(rank), t0, t1, width);
    int64_t tracked_max = 1;
    for (const auto& c : out.cols) tracked_max = std::max(tracked_max, c.total);
    auto with_process = out.cols;
    fill_process_columns(with_process, app.derived.process_timeline(rank), t0, t1);
    for (const auto& c : with_process) out.held_max = std::max(out.held_max, c.held);
    out.dwarfs = out.held_max > 4 * tracked_max;             // the categories would fill under a quarter of the plot
    const int process_band = app.views.memory.process_band;  // -1: automatic, 0: hidden, 1: shown
    out.show_process = process_band < 0 ? !out.dwarfs : process_band == 1;
    if (out.show_process) out.cols = std::move(with_process);
    return out;
}

// Each column: the categories stacked, then the allocator's cache, then what nothing tracks.
void draw_columns(const StackPlot& plot, const std::vector<MemoryColumn>& cols) {
    for (int x = 0; x < int(cols.size()); ++x) {
        const MemoryColumn& c = cols[size_t(x)];
        if (!c.has_data) continue;
        double base = 0;
        auto box = [&](int64_t bytes, ImU32 color) {
            plot.dl->AddRectFilled(ImVec2(plot.a0.x + x, plot.y_of(base + double(bytes))),
                                   ImVec2(plot.a0.x + x + 1, plot.y_of(base)), color);
            base += double(bytes);
        };
        for (int k = 0; k < kMemCategoryCount; ++k)
            if (c.bytes[size_t(k)] > 0) box(c.bytes[size_t(k)], category_color(k, 0.9f));
        for (const auto& [bytes, color] :
             {std::pair{c.cache_shown(), kCachedColor}, std::pair{c.untracked_shown(), kUntrackedColor}})
            if (bytes > 0) box(bytes, color);
    }
}

// Step marks (labelled where they fit), the predicted total as a dashed line, the y axis and the frame.
void draw_marks_and_axis(const StackPlot& plot, const prof::RankTrace& rank, const prof::RankReport* rr) {
    ImDrawList* dl = plot.dl;
    float last_label = -1e9f;
    for (const auto& [t, step] : step_marks(rank, plot.t0, plot.t1)) {
        const float x = plot.x_of(t);
        dl->AddLine(ImVec2(x, plot.a0.y), ImVec2(x, plot.a1.y), IM_COL32(255, 255, 255, 60));
        if (x - last_label > 60) {  // labels only where they fit
            dl->AddText(ImVec2(x + 3, plot.a0.y + 2), kTextDim, fmt::format("step {}", step).c_str());
            last_label = x;
        }
    }
    if (rr) {
        const float y = plot.y_of(double(rr->predicted.memory_total()));
        for (float x = plot.a0.x; x < plot.a1.x; x += 10)
            dl->AddLine(ImVec2(x, y), ImVec2(std::min(x + 5, plot.a1.x), y), IM_COL32(255, 255, 255, 140));
        const char* label = "predicted (sum of peaks)";
        const ImVec2 size = ImGui::CalcTextSize(label), at(plot.a1.x - size.x - 4, y + 2);
        dl->AddRectFilled(ImVec2(at.x - 2, at.y), ImVec2(at.x + size.x + 2, at.y + size.y), IM_COL32(18, 20, 26, 200));
        dl->AddText(at, kTextDim, label);  // over a dark patch: readable over the bars
    }
    // Labels every tick where they fit, every other where a large font would make them overlap.
    const float line = ImGui::GetTextLineHeight();
    const int every = plot.y_of(0) - plot.y_of(double(plot.ymax) / 4) < line ? 2 : 1;
    for (int i = 0; i <= 4; ++i) {
        const double v = double(plot.ymax) * i / 4;
        const float y = plot.y_of(v);
        dl->AddLine(ImVec2(plot.a0.x - 4, y), ImVec2(plot.a0.x, y), kTextDim);
        if (i % every != 0) continue;
        // centred on its tick at any font size, the top one kept inside the plot
        const float half = line / 2;
        dl->AddText(ImVec2(plot.p0.x, std::max(y - half, plot.p0.y)), kTextDim, format_bytes(int64_t(v)).c_str());
    }
    dl->AddRect(plot.a0, plot.a1, IM_COL32(70, 70, 80, 255));
}

// The hovered column's figures.
void column_tooltip(const AppState& app, const MemoryColumn& c) {
    ImGui::BeginTooltip();
    ImGui::Text("step %d, %s (%s)", c.step, std::string(prof::kPhaseNames[size_t(c.phase)]).c_str(), app.provenance());
    for (int k = kMemCategoryCount - 1; k >= 0; --k)
        if (c.bytes[size_t(k)] > 0)
            legend_item(
                category_color(k),
                fmt::format("{:<16} {}", kMemCategoryNames[size_t(k)], format_bytes(c.bytes[size_t(k)])).c_str());
    ImGui::Text("total            %s", format_bytes(c.total).c_str());
    if (c.held >= 0) {
        legend_item(kCachedColor, fmt::format("{:<16} {}", "allocator cache", format_bytes(c.cache_shown())).c_str());
        legend_item(kUntrackedColor,
                    fmt::format("{:<16} {}", "not tracked", format_bytes(c.untracked_shown())).c_str());
        ImGui::Text("process held     %s (sampled at the phase's start)", format_bytes(c.held).c_str());
    }
    ImGui::EndTooltip();
}

// Zoom and pan, shared with the timeline; the keys; the readout of the column under the mouse.
void handle_plot_input(AppState& app, const StackPlot& plot, const std::vector<MemoryColumn>& cols) {
    const ImGuiIO& io = ImGui::GetIO();
    const int64_t t0 = plot.t0, t1 = plot.t1;
    const int64_t t_mouse = t0 + int64_t(double(io.MousePos.x - plot.a0.x) / plot.w * double(t1 - t0));
    if (io.MouseWheel != 0) app.window.zoom(io.MouseWheel > 0 ? 0.8 : 1.25, t_mouse);
    if (ImGui::IsMouseDragging(ImGuiMouseButton_Left))
        app.window.pan(-int64_t(double(io.MouseDelta.x) / plot.w * double(t1 - t0)));
    if (!io.WantTextInput && ImGui::IsKeyPressed('F'))
        app.window.fit_step(app.report(), step_at(app.report(), t_mouse));
    if (!io.WantTextInput && ImGui::IsKeyPressed('A')) app.fit_all();
    const int x = int(io.MousePos.x - plot.a0.x);
    if (x < 0 || x >= int(cols.size()) || !cols[size_t(x)].has_data) return;
    plot.dl->AddLine(ImVec2(io.MousePos.x, plot.a0.y), ImVec2(io.MousePos.x, plot.a1.y), IM_COL32(255, 255, 255, 120));
    column_tooltip(app, cols[size_t(x)]);
}

// The button that shows or hides the process band, where it matters: right-aligned on the view's header line
// (`header_y`), clear of the plot's step labels.
void draw_process_toggle(AppState& app, const StackPlot& plot, const StackColumns& c, float header_y) {
    int& process_band = app.views.memory.process_band;
    if (c.held_max == 0) return;  // nothing sampled beside the categories
    const ImVec2 after = ImGui::GetCursorScreenPos();
    ImGui::PushFont(small_font());
    const std::string label = c.show_process
                                  ? std::string("hide the process band")
                                  : fmt::format("show what the process holds ({})", format_bytes(c.held_max));
    const float width = ImGui::CalcTextSize(label.c_str()).x + 2 * ImGui::GetStyle().FramePadding.x;
    ImGui::SetCursorScreenPos(ImVec2(plot.a1.x - width, header_y));
    if (ImGui::SmallButton(label.c_str())) process_band = c.show_process ? 0 : 1;
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "the process's resident set (or the device's memory in use) beyond the tracked categories:\n"
            "runtime, libraries, buffers; hidden by default when it is over 4x the categories' peak");
    ImGui::PopFont();
    ImGui::SetCursorScreenPos(after);
}

// The rank's bytes by category stacked over the time window, over its phases' bands, with step marks, the predicted
// total and a readout.
void draw_stack(AppState& app, const prof::RankTrace& rank, const prof::RankReport* rr, float height, float header_y) {
    StackPlot plot;
    plot.p0 = ImGui::GetCursorScreenPos();
    const float axis_w = 64;
    plot.w = std::max(80.0f, ImGui::GetContentRegionAvail().x - axis_w);
    plot.a0 = ImVec2(plot.p0.x + axis_w, plot.p0.y);
    plot.a1 = ImVec2(plot.a0.x + plot.w, plot.p0.y + height);
    plot.dl = ImGui::GetWindowDrawList();
    plot.dl->AddRectFilled(plot.a0, plot.a1, IM_COL32(18, 20, 26, 255));
    ImGui::InvisibleButton("memory_plot", ImVec2(plot.w + axis_w, height));
    const bool hovered = ImGui::IsItemHovered();
    plot.t0 = app.window.t0, plot.t1 = app.window.t1;
    const StackColumns c = stack_columns(app, rank.rank, int(plot.w));
    for (const auto& col : c.cols) plot.ymax = std::max({plot.ymax, col.total, col.held});
    if (rr) plot.ymax = std::max(plot.ymax, rr->predicted.memory_total());
    plot.yscale = (height - 4) / double(plot.ymax);
    for (const auto& b : phase_bands(rank, plot.t0, plot.t1)) {  // forward / backward / optimizer bands
        const float x0 = plot.x_of(std::max(b.begin, plot.t0)), x1 = plot.x_of(std::min(b.end, plot.t1));
        plot.dl->AddRectFilled(ImVec2(x0, plot.a0.y), ImVec2(std::max(x0 + 1, x1), plot.a1.y),
                               phase_color(b.phase, 0.10f));
    }
    draw_columns(plot, c.cols);
    draw_marks_and_axis(plot, rank, rr);
    if (hovered) handle_plot_input(app, plot, c.cols);
    draw_process_toggle(app, plot, c, header_y);
}

// One category's row of the peaks table: measured, predicted, the formula's, when, and step 1 against steady.
void draw_category_peak(const AppState& app, const prof::RankReport& r, int k) {
    auto cell = [](const std::string& text) {
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(text.c_str());
    };
    auto or_text = [](const std::optional<int64_t>& v, const char* none) {
        return v ? format_bytes(*v) : std::string(none);
    };
    // A planner's prediction shown as a trace: its peaks are the planner's figures (the engine's walk for this
    // engine's models, in the predicted column too; the formulas of docs/planner.md for others).
    const bool predicted_trace = app.showing_prediction();
    const auto& pred = r.predicted.memory[size_t(k)];
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    legend_item(category_color(k), std::string(kMemCategoryNames[size_t(k)]).c_str());
    cell(format_bytes(r.memory.peak[size_t(k)]));
    miss_marker(app.report().misses, "memory." + std::string(kMemCategoryNames[size_t(k)]), r.rank);
    cell(or_text(pred, predicted_trace ? "-" : "not modelled"));
    cell(or_text(r.predicted.memory_formula[size_t(k)], "-"));
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "formula: the textbook's figure (ZeRO bytes per parameter; Korthikanti et al. per layer x\n"
            "layers x micro-batches in flight); '-' where the textbook has none");
    cell(std::string(prof::kPhaseNames[size_t(r.memory.peak_phase[size_t(k)])]));
    ImGui::TableNextColumn();
    ImGui::Text("%s / %s", format_bytes(r.memory.step1_peak[size_t(k)]).c_str(),
                r.memory.has_steady ? format_bytes(r.memory.steady_peak[size_t(k)]).c_str() : "-");
}

// The sums: the peaks of the modelled categories (like for like with the prediction) and the peak of their sum.
void draw_peak_sums(const AppState& app, const prof::RankReport& r) {
    auto cell = [](const std::string& text) {
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(text.c_str());
    };
    if (!app.showing_prediction() || r.predicted.memory_total() > 0) {  // nothing to sum beside another model's
        ImGui::TableNextRow();
        cell("sum of peaks");
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip(
                "the sum of each modelled category's own peak, measured and predicted (the formula's: model\n"
                "states and activations); peaks of different categories need not coincide");
        cell(format_bytes(r.memory_modelled_sum_peak));
        cell(format_bytes(r.predicted.memory_total()));
        cell(format_bytes(r.predicted.memory_formula_total()));
        cell("");
        cell("");
    }
    ImGui::TableNextRow();
    cell("peak of the sum");
    cell(format_bytes(r.memory.total_peak));
    cell("");
    cell("");
    cell(std::string(prof::kPhaseNames[size_t(r.memory.total_peak_phase)]));
    ImGui::TableNextColumn();
    ImGui::Text("%s / %s", format_bytes(r.memory.step1_total_peak).c_str(),
                r.memory.has_steady ? format_bytes(r.memory.steady_total_peak).c_str() : "-");
}

// What the process held beyond the categories: the allocator's cache, what nothing tracks, the whole.
void draw_process_peaks(const prof::RankReport& r) {
    auto cell = [](const std::string& text) {
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(text.c_str());
    };
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    legend_item(kCachedColor, "allocator cache");
    cell(format_bytes(r.process.cached_peak));
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    legend_item(kUntrackedColor, "not tracked");
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "%s - the allocator's live and cached bytes, sampled at every phase boundary (measured):\n"
            "runtime, libraries, communication buffers, thread stacks, fragmentation",
            r.process.device ? "the device's memory in use (driver, all processes)" : "the resident set");
    cell(format_bytes(r.process.untracked_peak));
    for (const prof::DeviceMemoryPart& part : r.process.named_untracked) {  // a GPU rank: what the band holds
        ImGui::TableNextRow();
        cell("  " + part.name);
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip(
                "measured: the device's memory in use less the allocator's, before and after it started;\n"
                "device-wide: another process allocating on this GPU meanwhile counts here too");
        cell(format_bytes(part.bytes));
    }
    ImGui::TableNextRow();
    cell(r.process.device ? "device in use" : "process (RSS)");
    cell(format_bytes(r.process.held_peak));
}

void draw_peaks(const AppState& app, const prof::RankReport& r) {
    if (!begin_wide_table("peaks", 6, 0)) return;
    ImGui::TableSetupColumn("category");
    ImGui::TableSetupColumn(fmt::format("peak ({})", app.provenance()).c_str());
    ImGui::TableSetupColumn("predicted");
    ImGui::TableSetupColumn("formula");
    ImGui::TableSetupColumn("at");
    ImGui::TableSetupColumn("step 1 / steady");
    ImGui::TableHeadersRow();
    for (int k = 0; k < kMemCategoryCount; ++k) {
        const auto& pred = r.predicted.memory[size_t(k)];
        if (r.memory.peak[size_t(k)] != 0 || (pred && *pred != 0)) draw_category_peak(app, r, k);
    }
    draw_peak_sums(app, r);
    if (r.process.sampled) draw_process_peaks(r);
    ImGui::EndTable();
}

}  // namespace

void draw_memory_view(AppState& app) {
    const prof::TraceStore* store = app.store();
    if (!store || store->rank_count() == 0) {
        ImGui::TextColored(ImVec4(0.7f, 0.7f, 0.7f, 1), "%s", app.no_ranks_words().c_str());
        return;
    }
    const auto ranks = store->ranks();
    if (std::find(ranks.begin(), ranks.end(), app.window.selected_rank) == ranks.end())
        app.window.selected_rank = ranks.front();
    const prof::RankReport* rr = nullptr;
    for (const auto& r : app.report().ranks)
        if (r.rank == app.window.selected_rank) rr = &r;
    ImGui::SetNextItemWidth(em(200));
    if (ImGui::BeginCombo("rank", rr ? rr->label.c_str() : fmt::format("rank {}", app.window.selected_rank).c_str())) {
        for (const auto& r : app.report().ranks)
            if (ImGui::Selectable(r.label.c_str(), r.rank == app.window.selected_rank))
                app.window.selected_rank = r.rank;
        ImGui::EndCombo();
    }
    if (store->is_imported()) {  // a PyTorch trace: the allocator's bytes, no categories
        if (const prof::RankTrace* rt = store->rank(app.window.selected_rank)) draw_imported_memory(app, *rt);
        return;
    }
    ImGui::SameLine();
    const float header_y = ImGui::GetCursorScreenPos().y;  // the process band's toggle goes on this line
    if (!app.showing_prediction())
        ImGui::TextColored(ImVec4(0.65f, 0.65f, 0.65f, 1), "measured; dashed: predicted (sum of the modelled peaks)");
    else
        ImGui::TextColored(kPredictedColor, "PREDICTED by the planner's model, not measured");
    ImGui::PushFont(small_font());
    for (int k = 0, shown = 0; k < kMemCategoryCount; ++k) {
        if (rr && rr->memory.peak[size_t(k)] == 0) continue;
        if (shown++ > 0) ImGui::SameLine();
        legend_item(category_color(k), std::string(kMemCategoryNames[size_t(k)]).c_str());
    }
    if (rr && rr->process.sampled) {
        ImGui::SameLine();
        legend_item(kCachedColor, "allocator cache");
        ImGui::SameLine();
        legend_item(kUntrackedColor, "not tracked (runtime, libraries, buffers, fragmentation)");
    }
    ImGui::PopFont();
    const float table_rows = 13.0f + (rr ? float(rr->process.named_untracked.size()) : 0.0f);
    const float table_h = ImGui::GetTextLineHeightWithSpacing() * table_rows;
    const float plot_h = std::max(80.0f, ImGui::GetContentRegionAvail().y - table_h);
    draw_stack(app, *store->rank(app.window.selected_rank), rr, plot_h, header_y);
    if (rr) draw_peaks(app, *rr);
}

}  // namespace us::gui
