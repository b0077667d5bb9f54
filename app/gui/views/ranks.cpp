// Ranks: who holds the run back, for any number of ranks. The verdict in words; a rank x step heatmap of one
// figure (ranks down, grouped by a parallel coordinate or process group, sorted; steps across), the stragglers and
// the bottleneck stage marked; the stragglers' table. A click picks a rank: in a run held whole the timeline
// scrolls to it; in a run opened from its digests (thousands of ranks) its spans, and those of the ranks it waited
// for, are read into the timeline. Rows thinner than a pixel are folded: a pixel row shows the largest of its ranks,
// so an outlier among 4,096 still shows.
#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "app/gui/model/ranks_model.h"
#include "app/gui/widgets/theme.h"
#include "app/gui/views/views.h"
#include "app/gui/widgets/plot.h"

namespace us::gui {

namespace {

// 0 -> dark blue, the largest -> bright orange.
ImU32 heat_color(float v, float max) {
    if (v < 0) return IM_COL32(40, 40, 40, 255);  // the rank lacks the step
    const float t = max > 0 ? std::clamp(v / max, 0.0f, 1.0f) : 0.0f;
    auto mix = [](float a, float b, float u) { return int(a + (b - a) * u); };
    if (t < 0.5f) {
        const float u = t / 0.5f;
        return IM_COL32(mix(25, 150, u), mix(35, 60, u), mix(90, 130, u), 255);
    }
    const float u = (t - 0.5f) / 0.5f;
    return IM_COL32(mix(150, 255, u), mix(60, 190, u), mix(130, 60, u), 255);
}

std::string rank_label(const std::vector<prof::RankDigest>& digests, size_t index) {
    return digests[index].label.empty() ? fmt::format("rank {}", digests[index].rank) : digests[index].label;
}

// The rank and its place, without what was injected into it ("[injected: ...]"): the verdict and the tooltips say
// that, the narrow row labels and the table's first column do not.
std::string rank_place(const std::string& label) { return label.substr(0, label.find(" [")); }

// A combo's name before it, as a sentence reads ("figure [waiting suffered]"): ImGui puts it after, where it reads
// as the next combo's.
void name_before(const char* name, float width) {
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted(name);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(width);
}

void draw_controls(RanksViewState& st, const RanksModel& m) {
    name_before("figure", em(190));
    if (ImGui::BeginCombo("##figure", kRankFigureNames[int(st.figure)])) {
        for (int f = 0; f < int(RankFigure::count); ++f)
            if (ImGui::Selectable(kRankFigureNames[f], int(st.figure) == f)) st.figure = RankFigure(f);
        ImGui::EndCombo();
    }
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", kRankFigureHelp[int(st.figure)]);
    ImGui::SameLine(0, em(16));
    name_before("group by", em(130));
    if (ImGui::BeginCombo("##group by", st.group_by.empty() ? "none" : st.group_by.c_str())) {
        for (const std::string& g : m.groupings)
            if (ImGui::Selectable(g.empty() ? "none" : g.c_str(), st.group_by == g)) st.group_by = g;
        ImGui::EndCombo();
    }
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "a parallel coordinate of the engine's grid (the ranks sharing it in one block), or a "
            "process group of an imported trace");
    ImGui::SameLine(0, em(16));
    name_before("order", em(190));
    if (ImGui::BeginCombo("##order", kRankOrderNames[int(st.order)])) {
        for (int o = 0; o < int(RankOrder::count); ++o)
            if (ImGui::Selectable(kRankOrderNames[o], int(st.order) == o)) st.order = RankOrder(o);
        ImGui::EndCombo();
    }
}

// Where the heatmap's rows and columns are on screen. Rows may be far under a pixel: then a pixel row folds
// `per_pixel` ranks.
struct Heatmap {
    const RanksModel* m = nullptr;
    ImDrawList* dl = nullptr;
    ImVec2 origin;
    float label_w = 0, map_w = 0, line_h = 0, height = 0, row_h = 0, cw = 0;
    size_t rows = 0, cols = 0, per_pixel = 1;
    float y_of(size_t r) const { return origin.y + (per_pixel == 1 ? float(r) * row_h : float(r / per_pixel)); }
    bool labelled() const { return per_pixel == 1 && row_h >= line_h * 0.9f; }  // a label fits each row
};

// The colour scale (dark for none, bright for the largest cell) on its own line, then the steps across.
void draw_scale_and_steps(const RanksModel& m, ImDrawList* dl, float width, float label_w, float map_w) {
    const float line_h = ImGui::GetTextLineHeight();
    const ImVec2 top = ImGui::GetCursorScreenPos();
    const float bar_w = em(120), x = top.x + ImGui::CalcTextSize("0").x + 6;
    dl->AddText(top, kTextDim, "0");
    for (int i = 0; i < 32; ++i)
        dl->AddRectFilled(ImVec2(x + bar_w * float(i) / 32, top.y + 3),
                          ImVec2(x + bar_w * float(i + 1) / 32, top.y + line_h - 2),
                          heat_color(float(i) / 31 * m.max_value, m.max_value));
    dl->AddText(
        ImVec2(x + bar_w + 4, top.y), kTextDim,
        fmt::format("{} (a cell: the figure in one step)", format_duration_ns(double(m.max_value) * 1e9)).c_str());
    const float steps_y = top.y + line_h + 2;
    const float cw = map_w / float(m.steps.size());
    const size_t every = size_t(std::ceil(ImGui::CalcTextSize("step 00").x / std::max(1.0f, cw)));
    for (size_t c = 0; c < m.steps.size(); c += std::max<size_t>(1, every))
        dl->AddText(ImVec2(top.x + label_w + float(c) * cw + 2, steps_y), kTextDim,
                    fmt::format("{}{}", c == 0 ? "step " : "", m.steps[c]).c_str());
    ImGui::Dummy(ImVec2(width, 2 * (line_h + 2)));
}

// Cells: one per row, or per pixel row folding several ranks (their largest value).
void draw_cells(const Heatmap& h) {
    for (size_t r0 = 0; r0 < h.rows; r0 += h.per_pixel) {
        const size_t r1 = std::min(h.rows, r0 + h.per_pixel);
        const float y = h.y_of(r0);
        const float cell_h = h.per_pixel == 1 ? std::max(1.0f, h.row_h - (h.row_h > 4 ? 1 : 0)) : 1.0f;
        for (size_t c = 0; c < h.cols; ++c) {
            float v = -1;
            for (size_t r = r0; r < r1; ++r) v = std::max(v, h.m->at(r, c));
            const float x = h.origin.x + h.label_w + float(c) * h.cw;
            h.dl->AddRectFilled(ImVec2(x, y), ImVec2(x + std::max(1.0f, h.cw - (h.cw > 4 ? 1 : 0)), y + cell_h),
                                heat_color(v, h.m->max_value));
        }
    }
}

// The rows' labels where they fit, a frame around the marked ranks' rows and the picked one's (even folded), and
// the groups' boundaries and labels.
void draw_rows_and_groups(const Heatmap& h, const std::vector<prof::RankDigest>& digests, int picked) {
    const RanksModel& m = *h.m;
    ImDrawList* dl = h.dl;
    dl->PushClipRect(h.origin, ImVec2(h.origin.x + h.label_w - 4, h.origin.y + h.height + 1), true);
    if (h.labelled())
        for (size_t r = 0; r < h.rows; ++r) {
            const size_t i = m.rows[r];
            const auto mark = m.marks.find(digests[i].rank);
            dl->AddText(ImVec2(h.origin.x, h.origin.y + float(r) * h.row_h + (h.row_h - h.line_h) / 2),
                        mark != m.marks.end() ? kWarnColor : kTextDim, rank_place(rank_label(digests, i)).c_str());
        }
    dl->PopClipRect();
    auto frame_row = [&](size_t r, ImU32 color) {
        const float y = h.y_of(r);
        dl->AddRect(ImVec2(h.origin.x + h.label_w - 2, y - 1),
                    ImVec2(h.origin.x + h.label_w + h.map_w + 1, y + std::max(2.0f, h.row_h)), color, 0, 0, 2);
    };
    for (size_t r = 0; r < h.rows; ++r) {
        const int rank = digests[m.rows[r]].rank;
        if (m.marks.count(rank)) frame_row(r, kWarnColor);
        if (rank == picked) frame_row(r, IM_COL32(255, 255, 255, 255));
    }
    for (size_t g = 0; g < m.group_starts.size(); ++g) {
        const float y = h.y_of(m.group_starts[g]);
        if (g > 0)
            dl->AddLine(ImVec2(h.origin.x, y), ImVec2(h.origin.x + h.label_w + h.map_w, y),
                        IM_COL32(255, 255, 255, 160));
        if (!h.labelled() && !m.group_labels[g].empty())
            dl->AddText(ImVec2(h.origin.x, y), IM_COL32(200, 200, 230, 255), m.group_labels[g].c_str());
    }
}

// The hovered cell's figure (the largest of the ranks a pixel row folds); returns the rank clicked (-1 none).
int hover_cell(const Heatmap& h, const std::vector<prof::RankDigest>& digests, RankFigure figure) {
    const RanksModel& m = *h.m;
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    const size_t c = size_t(std::clamp(int((mouse.x - h.origin.x - h.label_w) / h.cw), 0, int(h.cols) - 1));
    const float dy = mouse.y - h.origin.y;
    size_t r0 = h.per_pixel == 1 ? size_t(std::max(0.0f, dy / h.row_h)) : size_t(std::max(0.0f, dy)) * h.per_pixel;
    r0 = std::min(r0, h.rows - 1);
    const size_t r1 = std::min(h.rows, r0 + h.per_pixel);
    size_t best = r0;  // the folded ranks' largest
    for (size_t r = r0; r < r1; ++r)
        if (m.at(r, c) > m.at(best, c)) best = r;
    const size_t i = m.rows[best];
    const float v = m.at(best, c);
    const auto mark = m.marks.find(digests[i].rank);
    ImGui::SetTooltip("%s, step %d: %s %s (measured)%s%s\nclick: open it in the timeline",
                      rank_label(digests, i).c_str(), m.steps[c], kRankFigureNames[int(figure)],
                      v < 0 ? "- (no such step)" : format_duration_ns(double(v) * 1e9).c_str(),
                      h.per_pixel > 1 ? fmt::format("\nthe largest of ranks {} to {} (folded: {} a pixel row)",
                                                    digests[m.rows[r0]].rank, digests[m.rows[r1 - 1]].rank, h.per_pixel)
                                            .c_str()
                                      : "",
                      mark != m.marks.end() ? ("\n" + mark->second).c_str() : "");
    return ImGui::IsMouseClicked(ImGuiMouseButton_Left) ? digests[i].rank : -1;
}

// The heatmap; returns the rank clicked (-1 none).
int draw_heatmap(const RanksModel& m, const std::vector<prof::RankDigest>& digests, RankFigure figure, int picked,
                 float width, float height) {
    Heatmap h;
    h.m = &m;
    h.rows = m.rows.size(), h.cols = m.steps.size();
    if (h.rows == 0 || h.cols == 0) return -1;
    h.dl = ImGui::GetWindowDrawList();
    h.label_w = em(170), h.map_w = std::max(60.0f, width - h.label_w);
    h.line_h = ImGui::GetTextLineHeight();
    draw_scale_and_steps(m, h.dl, width, h.label_w, h.map_w);
    h.origin = ImGui::GetCursorScreenPos();
    h.height = height - 2 * (h.line_h + 2);
    h.row_h = std::min(em(22), h.height / float(h.rows));  // may be far under a pixel
    h.cw = h.map_w / float(h.cols);
    h.per_pixel = h.row_h >= 1 ? 1 : size_t(std::ceil(1.0f / h.row_h));
    draw_cells(h);
    draw_rows_and_groups(h, digests, picked);
    const int pixel_rows = std::max(1, int(std::ceil(h.row_h * float(h.rows))));
    const float used_h = h.per_pixel == 1 ? h.row_h * float(h.rows) : float(pixel_rows);
    ImGui::InvisibleButton("ranks_heatmap", ImVec2(h.label_w + h.map_w, std::max(1.0f, used_h)));
    return ImGui::IsItemHovered() ? hover_cell(h, digests, figure) : -1;
}

// The stragglers' table; returns the rank clicked (-1 none).
int draw_stragglers(const prof::Blame& b) {
    int clicked = -1;
    if (b.stragglers.empty()) return clicked;
    const int shown = int(std::min<size_t>(b.stragglers.size(), 12));
    if (!begin_wide_table("stragglers", 7, shown)) return clicked;
    ImGui::TableSetupColumn("rank (most waiting caused)");
    ImGui::TableSetupColumn("others waited");
    ImGui::TableSetupColumn("last / matched");
    ImGui::TableSetupColumn("share");
    ImGui::TableSetupColumn("top in steps");
    ImGui::TableSetupColumn("compute vs group");
    ImGui::TableSetupColumn("excess wait for a core / late");
    ImGui::TableHeadersRow();
    for (int i = 0; i < shown; ++i) {
        const prof::Straggler& s = b.stragglers[size_t(i)];
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        if (s.stands_out) ImGui::PushStyleColor(ImGuiCol_Text, ImGui::ColorConvertU32ToFloat4(kWarnColor));
        // The rank and its place; what was injected into it, if anything, is in the verdict and the tooltip.
        const std::string place = rank_place(s.label);
        if (ImGui::Selectable(place.c_str(), false, ImGuiSelectableFlags_SpanAllColumns)) clicked = s.rank;
        if (place.size() < s.label.size() && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", s.label.c_str());
        if (s.stands_out) ImGui::PopStyleColor();
        ImGui::TableNextColumn();
        ImGui::Text("%.3f s", s.others_waited_s);
        ImGui::TableNextColumn();
        ImGui::Text("%d / %d", s.last_arrivals, s.collectives);
        ImGui::TableNextColumn();
        ImGui::Text("%.0f%%", 100 * s.share);
        ImGui::TableNextColumn();
        ImGui::Text("%d / %d", s.steps_on_top, s.steps_with_waiting);
        ImGui::TableNextColumn();
        if (s.compute_vs_median > 0)
            ImGui::Text("%.2fx", s.compute_vs_median);
        else
            ImGui::TextUnformatted("-");
        ImGui::TableNextColumn();  // per step: its wait for a core over its group's, against how late it came
        if (const auto& excess = s.trainer_wait.excess_s)
            ImGui::Text(
                "%+.1f / %.1f ms%s%s", 1e3 * *excess, 1e3 * s.late_s,
                s.workers_wait.excess_s ? fmt::format(", workers {:+.1f}", 1e3 * *s.workers_wait.excess_s).c_str() : "",
                s.waited_for_core           ? "  the machine's load"
                : s.workers_may_have_waited ? "  maybe the machine's load"
                                            : "");
        else
            ImGui::TextUnformatted("-");
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip(
                "its trainer thread's wait for a core a step beyond what its own time on a core would have waited at "
                "its group's other ranks' median share of waiting, against how late it came; then its OpenMP workers' "
                "(summed) the same way (measured: the kernel's run queue; the excess derived). The trainer's alone at "
                "least half: the machine's other load held it; with the others' at least half: it may have (a sum "
                "over threads is at most what they cost)");
    }
    ImGui::EndTable();
    return clicked;
}

// The verdict in words ("rank 11 holds the run back"), and what it was made of.
void draw_verdict(const RanksSource& src) {
    const prof::Blame& b = *src.blame;
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(b.culprit ? ImGui::ColorConvertU32ToFloat4(kWarnColor) : ImVec4(0.8f, 0.85f, 0.9f, 1), "%s",
                       b.verdict.c_str());
    ImGui::PopTextWrapPos();
    ImGui::TextColored(ImVec4(0.6f, 0.6f, 0.6f, 1),
                       "measured: %zu ranks%s; %d collectives matched across their groups, %.3f s of waiting in all",
                       src.digests->size(), src.from_digests ? " from their digests (the run is not held whole)" : "",
                       b.collectives_matched, b.waited_s);
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "The k-th collective of a group is one operation on each of its ranks: the rank whose part "
            "was shortest\narrived last, and each other rank's extra time was waiting for it. A rank "
            "waiting in a collective\nis the victim; the blame goes to the rank it waited for.");
    if (const std::string shared = src.core_sharing ? prof::oversubscribed_words(*src.core_sharing) : "";
        !shared.empty()) {
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kWarnColor), "cores: %s: the ranks take turns on them",
                           shared.c_str());
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip(
                "The ranks' compute threads (--threads each) outnumber the CPUs their processes may use on one "
                "machine\n(measured at their start). Every time here includes their turns, and their waits for a "
                "core are the\nrun's own as much as the machine's other load. Launch fewer ranks or threads to "
                "measure each rank alone.");
    }
}

// The picked rank's button: scroll the timeline to it, or (a large run) read it and its peers whole.
void draw_open_button(AppState& app, const RanksSource& src, int picked) {
    ImGui::SameLine();
    if (ImGui::Button(src.from_digests ? "open with its peers" : "show in timeline")) app.open_ranks({picked}, true);
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip(src.from_digests ? "read rank %d whole into the timeline, with the ranks it waited for "
                                             "(the stragglers named) and its pipeline neighbours"
                                           : "scroll the timeline to rank %d",
                          picked);
}

// Each pipeline's stages: work, waiting up- and downstream, the schedule's bubble; returns the rank clicked.
int draw_pipelines(const prof::Blame& b, int picked) {
    int clicked = -1;
    for (const prof::PipelineBlame& p : b.pipelines) {
        ImGui::Spacing();
        ImGui::Text("pipeline %s: bottleneck stage %d (rank %d), %.3f s of work a step, median %.3f s (measured)",
                    nlohmann::json(p.ranks).dump().c_str(), p.bottleneck_stage, p.bottleneck_rank,
                    p.bottleneck_compute_s, p.median_compute_s);
        if (!begin_wide_table(fmt::format("stages{}", p.ranks.front()).c_str(), 5, int(p.stages.size()))) continue;
        for (const char* h :
             {"stage (rank)", "work s", "waiting upstream s", "waiting downstream s", "schedule bubble s"})
            ImGui::TableSetupColumn(h);
        ImGui::TableHeadersRow();
        for (const prof::StageBlame& s : p.stages) {
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            if (ImGui::Selectable(fmt::format("{} ({})", s.stage, s.rank).c_str(), s.rank == picked,
                                  ImGuiSelectableFlags_SpanAllColumns))
                clicked = s.rank;
            for (double v : {s.compute_s, s.waiting_upstream_s, s.waiting_downstream_s, s.schedule_bubble_s}) {
                ImGui::TableNextColumn();
                ImGui::Text("%.3f", v);
            }
        }
        ImGui::EndTable();
    }
    return clicked;
}

}  // namespace

void draw_ranks_view(AppState& app) {
    RanksViewState& st = app.views.ranks;
    const LargeRun& large = app.large_run;
    if (large.active() && large.digesting()) {
        ImGui::Text("digesting %s: %zu of %zu rank files", large.label().c_str(), large.files_done(),
                    large.files_total());
        ImGui::ProgressBar(large.files_total() ? float(large.files_done()) / float(large.files_total()) : 0.0f);
        return;
    }
    const RanksSource src = app.ranks_source();
    if (!src.digests || src.digests->empty()) {
        ImGui::TextColored(ImVec4(0.7f, 0.7f, 0.7f, 1), "no ranks yet");
        return;
    }
    const prof::Blame& b = *src.blame;
    draw_verdict(src);
    const RanksModel m = build_ranks_model(*src.digests, b, st.figure, st.group_by, st.order);
    if (std::find(m.groupings.begin(), m.groupings.end(), st.group_by) == m.groupings.end()) st.group_by.clear();
    draw_controls(st, m);
    if (st.picked >= 0) draw_open_button(app, src, st.picked);
    // A few ranks make a short heatmap: the tables go under it, at the window's width, where their columns fit.
    // Many ranks take the height: the tables sit beside them.
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float short_heat_h = float(m.rows.size()) * em(22) + em(48);
    const bool stacked = short_heat_h < avail.y * 0.5f;
    const float table_w = stacked ? 0.0f : std::min(em(560), avail.x * 0.45f);
    ImGui::BeginChild("heat", ImVec2(stacked ? 0.0f : avail.x - table_w - em(8), stacked ? short_heat_h : 0.0f));
    ImGui::PushFont(small_font());
    const int clicked = draw_heatmap(m, *src.digests, st.figure, st.picked, ImGui::GetContentRegionAvail().x,
                                     ImGui::GetContentRegionAvail().y - em(4));
    ImGui::PopFont();
    ImGui::EndChild();
    if (!stacked) ImGui::SameLine();
    ImGui::BeginChild("table", ImVec2(0, 0));
    int from_table = draw_stragglers(b);
    if (const int stage = draw_pipelines(b, st.picked); stage >= 0) from_table = stage;
    ImGui::EndChild();
    const int pick = clicked >= 0 ? clicked : from_table;
    if (pick >= 0) {
        st.picked = pick;
        if (!src.from_digests) app.open_ranks({pick}, false);  // a scroll; a large run waits for the button
    }
}

}  // namespace us::gui
