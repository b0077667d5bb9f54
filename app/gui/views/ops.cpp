// Ops: where a rank's compute goes, op by op, over the steady steps (the report's op table, op_table.h): calls,
// self time per step and its share of the step, time per call and the FLOP rate, sortable, with a bar per row.
// The rank follows the timeline's selection; the rows are the GPU's kernels on a rank traced by CUPTI or PyTorch's
// profiler, shown by their short names (the full signature on hover) and their kinds (gemm, elementwise ...).
#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "app/gui/views/views.h"

namespace us::gui {

namespace {

enum Column { kName, kClass, kCalls, kTime, kShare, kPerCall, kRate };

// The numeric columns' sort keys (time and share sort alike).
double sort_value(const prof::OpRow& r, int column) {
    switch (column) {
        case kCalls:
            return double(r.calls);
        case kPerCall:
            return r.per_call_s();
        case kRate:
            return prof::OpTable::flop_rate(r);
        default:
            return r.self_s;
    }
}

// The rank the timeline selected, else the one with the most compute.
const prof::RankReport* shown_rank(const AppState& app) {
    const prof::Report& rep = app.report();
    const prof::RankReport* shown = nullptr;
    for (const auto& r : rep.ranks)
        if (r.rank == app.window.selected_rank) shown = &r;
    if (!shown)
        for (const auto& r : rep.ranks)
            if (!shown || r.steady.compute_s > shown->steady.compute_s) shown = &r;
    return shown;
}

void draw_heading(const prof::Report& rep, const prof::RankReport& shown) {
    const prof::OpTable& t = shown.ops;
    ImGui::Text("%s, per steady step (%s, %d step%s): ops %.1f of %.1f ms", shown.label.c_str(), rep.source(), t.steps,
                t.steps == 1 ? "" : "s", 1e3 * t.per_step(t.self_s()), 1e3 * t.per_step(t.wall_s));
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "Self time: an op nested in another is taken out of its parent, so the rows add up to the\n"
            "compute time. %s\nThe rank is the one selected in the timeline (click a rank's label there).\n"
            "GFLOP/s: the FLOPs the engine's op spans carry over their time; attention's count the\n"
            "whole s x s square, as the 6N + 12Lhs formula does (a causal kernel does about half).",
            t.device_kernels ? "The rows are the GPU's kernels as CUPTI timed them (they carry no FLOPs)."
                             : "The rows are the engine's op spans on the compute lane.");
}

void setup_columns(const prof::OpTable& t) {
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn(t.device_kernels ? "kernel" : "op", ImGuiTableColumnFlags_WidthStretch, 3.0f, kName);
    ImGui::TableSetupColumn("class", ImGuiTableColumnFlags_WidthStretch, 1.1f, kClass);
    ImGui::TableSetupColumn("calls/step", ImGuiTableColumnFlags_WidthStretch, 0.8f, kCalls);
    ImGui::TableSetupColumn("ms/step",
                            ImGuiTableColumnFlags_WidthStretch | ImGuiTableColumnFlags_DefaultSort |
                                ImGuiTableColumnFlags_PreferSortDescending,
                            1.0f, kTime);
    ImGui::TableSetupColumn(
        "% of step", ImGuiTableColumnFlags_WidthStretch | ImGuiTableColumnFlags_PreferSortDescending, 1.6f, kShare);
    ImGui::TableSetupColumn("us/call", ImGuiTableColumnFlags_WidthStretch, 1.0f, kPerCall);
    ImGui::TableSetupColumn("GFLOP/s", ImGuiTableColumnFlags_WidthStretch | ImGuiTableColumnFlags_PreferSortDescending,
                            1.0f, kRate);
    ImGui::TableHeadersRow();
}

// The rows in the table's sort order.
std::vector<const prof::OpRow*> sorted_rows(const prof::OpTable& t) {
    std::vector<const prof::OpRow*> rows;
    rows.reserve(t.rows.size());
    for (const auto& r : t.rows) rows.push_back(&r);
    const ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs();
    if (!specs || specs->SpecsCount == 0) return rows;
    const int column = int(specs->Specs[0].ColumnUserID);
    const bool ascending = specs->Specs[0].SortDirection == ImGuiSortDirection_Ascending;
    std::stable_sort(rows.begin(), rows.end(), [&](const prof::OpRow* a, const prof::OpRow* b) {
        if (column == kName || column == kClass) {  // as shown: the short name, the (fine) class
            const std::string_view x = column == kName ? std::string_view(a->short_name) : a->kind;
            const std::string_view y = column == kName ? std::string_view(b->short_name) : b->kind;
            return ascending ? x < y : y < x;
        }
        const double x = sort_value(*a, column), y = sort_value(*b, column);
        return ascending ? x < y : y < x;
    });
    return rows;
}

// The op's name and class, with the full name (a kernel's whole signature, Kineto's run to kilobytes) on hover.
void draw_name_cells(const prof::OpTable& t, const prof::OpRow& r) {
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(prof::fit_op_name(r.short_name, 60).c_str());
    if (ImGui::IsItemHovered()) {
        ImGui::BeginTooltip();
        ImGui::PushTextWrapPos(ImGui::GetFontSize() * 50.0f);
        ImGui::TextUnformatted(r.name.c_str());
        ImGui::PopTextWrapPos();
        ImGui::Text("%lld calls over %d steps; longest call %.1f us; whole spans %.3f ms per step",
                    static_cast<long long>(r.calls), t.steps, 1e6 * r.longest_s, 1e3 * t.per_step(r.total_s));
        ImGui::EndTooltip();
    }
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(r.kind.data(), r.kind.data() + r.kind.size());
    if (ImGui::IsItemHovered() && t.device_kernels)
        ImGui::SetTooltip(
            "the kernel's kind, from its name (else from the op that launched it): "
            "docs/pytorch-traces.md, \"Kernel names and classes\"; the op's class: %s",
            std::string(prof::kOpClassNames[size_t(r.op)]).c_str());
}

// Calls, time and share (with a bar against the largest), time per call, FLOP rate.
void draw_figure_cells(const prof::OpTable& t, const prof::OpRow& r, double most) {
    ImGui::TableNextColumn();
    ImGui::Text("%.1f", double(r.calls) / t.steps);
    ImGui::TableNextColumn();
    ImGui::Text("%.2f", 1e3 * t.per_step(r.self_s));
    ImGui::TableNextColumn();
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float w = ImGui::GetContentRegionAvail().x, h = ImGui::GetTextLineHeight();
    ImGui::GetWindowDrawList()->AddRectFilled(
        ImVec2(p.x, p.y + 2), ImVec2(p.x + float(r.self_s / most) * w, p.y + h - 2), IM_COL32(90, 150, 240, 110));
    ImGui::Text("%.1f%%", 100 * t.share_of_wall(r.self_s));
    ImGui::TableNextColumn();
    ImGui::Text("%.1f", 1e6 * r.per_call_s());
    ImGui::TableNextColumn();
    const double rate = prof::OpTable::flop_rate(r);
    if (rate > 0)
        ImGui::Text("%.1f%s", rate / 1e9, r.flops_count_whole_square() ? "*" : "");
    else
        ImGui::TextDisabled("-");
}

}  // namespace

void draw_ops_view(AppState& app) {
    const prof::Report& rep = app.report();
    const prof::RankReport* shown = shown_rank(app);
    if (!shown || shown->ops.rows.empty()) {
        ImGui::TextDisabled(
            "No op spans in the steady steps yet (the first step is left out: it allocates and warms up).");
        return;
    }
    const prof::OpTable& t = shown->ops;
    draw_heading(rep, *shown);
    const ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                                  ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_Resizable |
                                  ImGuiTableFlags_SizingStretchProp;
    if (!ImGui::BeginTable("ops", 7, flags)) return;
    setup_columns(t);
    const std::vector<const prof::OpRow*> rows = sorted_rows(t);
    double most = 1e-12;
    for (const auto* r : rows) most = std::max(most, r->self_s);
    ImGuiListClipper clipper;
    clipper.Begin(int(rows.size()));
    while (clipper.Step())
        for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
            ImGui::TableNextRow();
            draw_name_cells(t, *rows[size_t(i)]);
            draw_figure_cells(t, *rows[size_t(i)], most);
        }
    ImGui::EndTable();
}

}  // namespace us::gui
