// Hang: what holds a hung job, from its ranks' Flight Recorder dumps (docs/hangs.md). The verdict first with its
// evidence, as the Ranks view gives its blame; a group picked (hung first, roots before victims); its members x its
// last collectives by sequence id, each cell the state a dump records, the first divergence outlined and the
// culprits' rows marked, members that look alike folded into one band (4,096 ranks read as a few rows); the
// culprits' stacks beside it; a rank clicked shows its entries. Measured, all of it: nothing here is predicted.
#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "app/gui/model/hang_model.h"
#include "app/gui/views/views.h"
#include "app/gui/widgets/theme.h"
#include "profiler/hang/collective_call.h"
#include "profiler/hang/hang_verdict_text.h"

namespace us::gui {

namespace {

const ImVec4 kDim(0.6f, 0.6f, 0.6f, 1);
constexpr ImU32 kDivergenceColor = IM_COL32(255, 225, 80, 255);

ImU32 cell_color(HangCell c) {
    switch (c) {
        case HangCell::completed:
            return IM_COL32(70, 160, 95, 255);
        case HangCell::started:
            return IM_COL32(235, 165, 55, 255);
        case HangCell::scheduled:
            return IM_COL32(95, 120, 190, 255);
        case HangCell::not_held:
            return IM_COL32(72, 72, 80, 255);
        default:
            return IM_COL32(0, 0, 0, 0);  // absent: an empty box
    }
}

void draw_cell(ImDrawList* dl, ImVec2 a, ImVec2 b, HangCell c) {
    if (c == HangCell::absent)
        dl->AddRect(a, b, IM_COL32(110, 110, 110, 255));
    else
        dl->AddRectFilled(a, b, cell_color(c));
}

// Goes on the same line when `width` more fits left of `right` (a screen x), else starts a new one.
void same_line_if_fits(float width, float right) {
    ImGui::SameLine(0, em(14));
    if (ImGui::GetCursorScreenPos().x + width > right) ImGui::NewLine();
}

// The cells' states, the outline and the mark, within `width`.
void draw_legend(float width) {
    const float right = ImGui::GetCursorScreenPos().x + width;
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float s = ImGui::GetTextLineHeight() * 0.8f;
    for (int c = int(HangCell::count) - 1; c >= 0; --c) {
        if (c != int(HangCell::count) - 1) same_line_if_fits(s + 4 + ImGui::CalcTextSize(kHangCellNames[c]).x, right);
        const ImVec2 p = ImGui::GetCursorScreenPos();
        draw_cell(dl, ImVec2(p.x, p.y + 2), ImVec2(p.x + s, p.y + 2 + s), HangCell(c));
        ImGui::Dummy(ImVec2(s + 2, s));
        ImGui::SameLine();
        ImGui::TextUnformatted(kHangCellNames[c]);
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", kHangCellHelp[c]);
    }
    const char* divergence = "[ ] first divergence";
    same_line_if_fits(ImGui::CalcTextSize(divergence).x, right);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kDivergenceColor), "%s", divergence);
    same_line_if_fits(ImGui::CalcTextSize("! culprit").x, right);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kWarnColor), "! culprit");
}

// A sentence, cut where it would fill the view (a group of 4,096 ranks names them all): the whole of it on hover.
void draw_sentence(const ImVec4& color, const std::string& text, const char* prefix = "") {
    constexpr size_t kMost = 320;
    if (text.size() <= kMost) return ImGui::TextColored(color, "%s%s", prefix, text.c_str());
    ImGui::TextColored(color, "%s%s ... (%zu characters: hover)", prefix, text.substr(0, kMost).c_str(), text.size());
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", text.substr(0, 8000).c_str());
}

// The verdict in words, its evidence, and what it was made of.
void draw_verdict(const LoadedHang& l) {
    const hang::HangAnalysis& a = l.analysis;
    ImGui::PushTextWrapPos(0);
    draw_sentence(
        a.kind != hang::HangKind::none ? ImGui::ColorConvertU32ToFloat4(kWarnColor) : ImVec4(0.8f, 0.85f, 0.9f, 1),
        a.verdict);
    // Beside the timeline (narrow) the evidence folds, so that the grid shows; the view alone lists it.
    const bool folded = ImGui::GetContentRegionAvail().x < em(820) && !a.evidence.empty();
    if (!folded || ImGui::TreeNode("evidence", "its evidence (%zu)", a.evidence.size())) {
        for (size_t i = 0; i < a.evidence.size() && i < 6; ++i) draw_sentence(kDim, a.evidence[i], "- ");
        if (a.evidence.size() > 6) ImGui::TextColored(kDim, "- ... %zu more", a.evidence.size() - 6);
        if (folded) ImGui::TreePop();
    }
    size_t hung = 0;
    for (const hang::GroupState& g : a.groups) hung += g.kind != hang::HangKind::none;
    ImGui::TextColored(kDim, "measured: %s; %zu ranks of a world of %d, %zu process groups, %zu hung", l.label.c_str(),
                       a.ranks.size(), a.world, a.groups.size(), hung);
    ImGui::PopTextWrapPos();
    if (const auto& left_out = l.dumps.left_out; !left_out.empty()) {
        if (ImGui::TreeNode("left out", "%zu file%s left out (the rest analysed)", left_out.size(),
                            left_out.size() == 1 ? "" : "s")) {
            for (size_t i = 0; i < left_out.size() && i < 50; ++i) ImGui::TextWrapped("%s", left_out[i].c_str());
            ImGui::TreePop();
        }
    }
}

void draw_group_selector(HangState& st, const hang::HangAnalysis& a) {
    const std::vector<HangGroupChoice>& choices = st.choices();
    std::string current;
    for (const HangGroupChoice& c : choices)
        if (c.group == st.group) current = c.label;
    ImGui::SetNextItemWidth(std::min(ImGui::GetContentRegionAvail().x - em(60), em(520)));
    if (ImGui::BeginCombo("group", current.c_str())) {
        for (const HangGroupChoice& c : choices)
            if (ImGui::Selectable(c.label.c_str(), c.group == st.group)) st.group = c.group;
        ImGui::EndCombo();
    }
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip(
            "each process-group instance (its name and desc), hung groups first, the root before the "
            "groups it holds");
    if (st.group < 0) return;
    const hang::GroupState& g = a.groups[size_t(st.group)];
    if (!g.detail.empty()) {
        ImGui::PushTextWrapPos(0);
        draw_sentence(kDim, g.detail);
        ImGui::PopTextWrapPos();
    }
}

// Where the grid's parts are on screen.
struct GridLayout {
    ImVec2 origin;  // the first row's top left
    float label_w = 0, cw = 0, row_h = 0, header_h = 0;
    float cells_x() const { return origin.x + label_w; }
};

void draw_header(const HangGrid& m, const GridLayout& g, ImDrawList* dl) {
    const float y = g.origin.y - g.header_h;
    const size_t every = size_t(std::max(1.0f, std::ceil(ImGui::CalcTextSize("#0000").x / g.cw)));
    auto near_divergence = [&](size_t c) {  // its label would run into the divergence's
        return m.divergence >= 0 && int(c) != m.divergence && size_t(std::abs(int(c) - m.divergence)) < every;
    };
    for (size_t c = 0; c < m.seqs.size(); ++c)
        if (int(c) == m.divergence || (c % every == 0 && !near_divergence(c)))
            dl->AddText(ImVec2(g.cells_x() + float(c) * g.cw + 2, y + g.header_h / 2), kTextDim,
                        fmt::format("#{}", m.seqs[c]).c_str());
    if (m.divergence >= 0) {
        const float x = g.cells_x() + float(m.divergence) * g.cw;
        dl->AddText(
            ImVec2(x, y), kDivergenceColor,
            fmt::format("first divergence: {} #{}", m.ops[size_t(m.divergence)], m.seqs[size_t(m.divergence)]).c_str());
    }
}

void draw_band(const HangGrid& m, const GridLayout& g, ImDrawList* dl, size_t b, bool picked) {
    const HangBand& band = m.bands[b];
    const float y = g.origin.y + float(b) * g.row_h, h = g.row_h - 3;
    const float text_y = y + (h - ImGui::GetTextLineHeight()) / 2;
    const std::string label = (band.culprit ? "! " : "") + band.label;
    dl->PushClipRect(ImVec2(g.origin.x, y), ImVec2(g.cells_x() - 4, y + g.row_h), true);
    dl->AddText(ImVec2(g.origin.x, text_y), band.culprit || band.absent ? kWarnColor : kTextDim, label.c_str());
    dl->PopClipRect();
    for (size_t c = 0; c < m.seqs.size(); ++c) {
        const float x = g.cells_x() + float(c) * g.cw;
        draw_cell(dl, ImVec2(x + 1, y + 1), ImVec2(x + g.cw - 1, y + h), m.at(b, c));
    }
    const float right = g.cells_x() + float(m.seqs.size()) * g.cw;
    dl->AddText(ImVec2(right + em(8), text_y), band.absent ? kWarnColor : kTextDim, band.progress.c_str());
    if (band.culprit) dl->AddRect(ImVec2(g.cells_x() - 1, y), ImVec2(right, y + h), kWarnColor, 0, 0, 2);
    if (picked)  // the band of the rank whose entries show below
        dl->AddRect(ImVec2(g.cells_x() - 3, y - 2), ImVec2(right + 2, y + h + 2), IM_COL32(255, 255, 255, 255), 0, 0,
                    1.5f);
}

// A cell's readout: the band, its progress, and what its first rank recorded there.
void cell_tooltip(const LoadedHang& l, const HangGrid& m, size_t b, size_t c) {
    const HangBand& band = m.bands[b];
    const auto call = hang_call_at(l.analysis, l.dumps, m.group, band.ranks.front(), m.seqs[c]);
    std::string what =
        call ? fmt::format("{} {}, {}", call->op, hang::shapes_label(*call), call->state) : std::string("no entry");
    ImGui::SetTooltip("%s: %s\n#%lld: %s (measured)\n%s%s\nclick: its entries", band.label.c_str(),
                      band.progress.c_str(), (long long)m.seqs[c], kHangCellNames[int(m.at(b, c))],
                      band.ranks.size() > 1 ? fmt::format("rank {}: ", band.ranks.front()).c_str() : "", what.c_str());
}

// The grid, drawing only the rows in view; returns the rank clicked (-1 none).
int draw_grid(const LoadedHang& l, const HangGrid& m, int picked) {
    if (m.seqs.empty() || m.bands.empty()) {
        ImGui::TextColored(kDim, "no collective of this group in the dumps' buffers (p2p only, or wrapped away)");
        return -1;
    }
    GridLayout g;
    g.row_h = em(22);
    g.header_h = 2 * ImGui::GetTextLineHeight() + 4;
    for (size_t b = 0; b < m.bands.size() && b < 200; ++b)
        g.label_w = std::max(g.label_w, ImGui::CalcTextSize(("! " + m.bands[b].label).c_str()).x + em(10));
    g.label_w = std::min(g.label_w, em(320));
    float progress_w = 0;  // the bands' progress, right of the cells
    for (size_t b = 0; b < m.bands.size() && b < 200; ++b)
        progress_w = std::max(progress_w, ImGui::CalcTextSize(m.bands[b].progress.c_str()).x + em(12));
    const float avail = ImGui::GetContentRegionAvail().x;
    g.cw = std::clamp((avail - g.label_w - std::min(progress_w, em(330))) / float(m.seqs.size()), em(16), em(44));
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 top = ImGui::GetCursorScreenPos();
    g.origin = ImVec2(top.x, top.y + g.header_h);
    draw_header(m, g, dl);
    const float clip_top = ImGui::GetWindowPos().y, clip_bottom = clip_top + ImGui::GetWindowHeight();
    for (size_t b = 0; b < m.bands.size(); ++b) {
        const float y = g.origin.y + float(b) * g.row_h;
        if (y + g.row_h < clip_top || y > clip_bottom) continue;
        const auto& r = m.bands[b].ranks;
        draw_band(m, g, dl, b, std::binary_search(r.begin(), r.end(), picked));
    }
    const float rows_h = float(m.bands.size()) * g.row_h;
    if (m.divergence >= 0) {
        const float x = g.cells_x() + float(m.divergence) * g.cw;
        dl->AddRect(ImVec2(x - 1, g.origin.y - g.header_h / 2), ImVec2(x + g.cw + 1, g.origin.y + rows_h),
                    kDivergenceColor, 0, 0, 2.5f);
    }
    ImGui::Dummy(ImVec2(avail, g.header_h));
    ImGui::InvisibleButton("hang_grid", ImVec2(g.cells_x() - top.x + float(m.seqs.size()) * g.cw, rows_h));
    if (!ImGui::IsItemHovered()) return -1;
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    const size_t b = std::min(m.bands.size() - 1, size_t(std::max(0.0f, (mouse.y - g.origin.y) / g.row_h)));
    if (mouse.x >= g.cells_x())
        cell_tooltip(l, m, b, std::min(m.seqs.size() - 1, size_t((mouse.x - g.cells_x()) / g.cw)));
    if (!ImGui::IsMouseClicked(ImGuiMouseButton_Left)) return -1;
    const auto& r = m.bands[b].ranks;
    return std::binary_search(r.begin(), r.end(), picked) ? picked : r.front();
}

void draw_stack(const std::vector<hang::StackFrame>& stack) {
    for (size_t i = 0; i < stack.size() && i < 10; ++i)
        ImGui::Text("  %s:%d in %s", stack[i].file.c_str(), stack[i].line, stack[i].name.c_str());
    if (stack.size() > 10) ImGui::TextColored(kDim, "  ... %zu more frames", stack.size() - 10);
    if (stack.empty()) ImGui::TextColored(kDim, "  (no frames recorded)");
}

// The culprits, each with its last completed collective and its stack (file:line in function); returns the rank
// clicked (-1 none).
int draw_culprits(const hang::HangAnalysis& a) {
    int clicked = -1;
    if (a.culprits.empty()) {
        ImGui::TextColored(kDim, "no culprit: %s", a.kind == hang::HangKind::none ? "every group agrees" : "see above");
        return clicked;
    }
    if (!a.node.empty()) ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kWarnColor), "node %s", a.node.c_str());
    for (size_t i = 0; i < a.culprits.size() && i < 6; ++i) {
        const hang::Culprit& c = a.culprits[i];
        ImGui::PushStyleColor(ImGuiCol_Text, ImGui::ColorConvertU32ToFloat4(kWarnColor));
        const std::string who = fmt::format("rank {}{}{}", c.rank, c.host.empty() ? "" : " on " + c.host,
                                            c.absent ? " (no dump: a suspect for that alone)" : "");
        if (ImGui::Selectable(who.c_str())) clicked = c.rank;
        ImGui::PopStyleColor();
        if (c.last_completed.seq_id >= 0)
            ImGui::TextColored(kDim, "last completed: %s", hang::call_label(c.last_completed).c_str());
        ImGui::TextColored(kDim, "stack of its entry that matters (innermost first):");
        draw_stack(c.stack);
    }
    if (a.culprits.size() > 6) ImGui::TextColored(kDim, "... %zu more culprits", a.culprits.size() - 6);
    if (!a.reference_stack.empty()) {
        ImGui::TextColored(kDim, "what the others called, a member's stack:");
        draw_stack(a.reference_stack);
    }
    return clicked;
}

void entry_row(const HangEntryRow& r) {
    const ImVec4 color = r.divergence ? ImGui::ColorConvertU32ToFloat4(kWarnColor)
                         : r.in_group ? ImGui::GetStyleColorVec4(ImGuiCol_Text)
                                      : kDim;
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextColored(color, "%lld", (long long)r.record_id);
    for (const std::string* s : {&r.group, &r.seq, &r.op, &r.sizes, &r.dtypes, &r.state, &r.created, &r.took}) {
        ImGui::TableNextColumn();
        ImGui::TextColored(color, "%s", s->c_str());
    }
}

// The picked rank's entries, newest first, every one its ring holds (clipped to the rows in view).
void draw_entries(HangState& st) {
    ImGui::SetNextItemWidth(em(110));
    ImGui::InputInt("rank", &st.picked_rank);
    st.picked_rank = std::max(st.picked_rank, -1);
    if (st.picked_rank < 0) {
        ImGui::SameLine();
        ImGui::TextColored(kDim, "a rank's entries in its dump: give its number, or click a member in the grid");
        return;
    }
    const std::vector<HangEntryRow>& rows = st.entries();
    ImGui::SameLine();
    ImGui::TextColored(kDim, "%zu entries in its dump, newest first (measured: the dump's own fields)", rows.size());
    if (rows.empty()) return;
    const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV |
                                  ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_ScrollX | ImGuiTableFlags_ScrollY;
    if (!ImGui::BeginTable("hang_entries", 9, flags, ImVec2(0, std::max(em(200), ImGui::GetContentRegionAvail().y))))
        return;
    ImGui::TableSetupScrollFreeze(1, 1);
    for (const char* h : {"record", "group", "seq", "op", "sizes in -> out", "dtypes", "state", "created", "took"})
        ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    ImGuiListClipper clipper;
    clipper.Begin(int(rows.size()));
    while (clipper.Step())
        for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) entry_row(rows[size_t(i)]);
    ImGui::EndTable();
}

void draw_empty(const HangState& st) {
    if (st.loading()) {
        ImGui::TextUnformatted(st.progress_line().c_str());
        return;
    }
    ImGui::PushTextWrapPos(0);
    ImGui::TextColored(kDim,
                       "no hung job: open a job's Flight Recorder dumps (ultrascope DUMPS..., or File > Open: one "
                       "file per rank, a folder or a glob) to see which rank, group, collective and line of code "
                       "hold it (docs/hangs.md)");
    ImGui::PopTextWrapPos();
}

}  // namespace

void draw_hang_view(AppState& app) {
    HangState& st = app.hang;
    const LoadedHang* l = st.loaded();
    if (!l) return draw_empty(st);
    draw_verdict(*l);
    draw_group_selector(st, l->analysis);
    const HangGrid& m = st.grid();
    // The grid is the group's collectives: a hang in its sends and receives is in the entries below, said here so
    // that a culprit's row reading "completed" is not taken for a healthy rank.
    if (st.group >= 0 && l->analysis.groups[size_t(st.group)].collective.p2p &&
        l->analysis.groups[size_t(st.group)].kind != hang::HangKind::none)
        ImGui::TextColored(kDim,
                           "this group hangs in point-to-point operations (%s): the grid shows its collectives "
                           "only; a rank's sends and receives are in its entries below",
                           hang::call_label(l->analysis.groups[size_t(st.group)].collective).c_str());
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const bool side_by_side = avail.x >= em(820);  // else the culprits go below the grid
    const float content_h = 2 * ImGui::GetTextLineHeight() + 8 + float(m.bands.size()) * em(22) + em(10);
    const float grid_h = std::min(content_h, std::max(em(140), avail.y * 0.5f));
    const float grid_w = side_by_side ? avail.x * 0.64f : avail.x;
    ImGui::BeginGroup();
    ImGui::BeginChild("hang_grid_area", ImVec2(grid_w, grid_h));
    int clicked = draw_grid(*l, m, st.picked_rank);
    ImGui::EndChild();
    draw_legend(grid_w);
    ImGui::EndGroup();
    if (side_by_side) {
        ImGui::SameLine();
        ImGui::BeginChild("hang_culprits", ImVec2(0, ImGui::GetItemRectSize().y));
    }
    if (const int c = draw_culprits(l->analysis); c >= 0) clicked = c;
    if (side_by_side) ImGui::EndChild();
    if (clicked >= 0) st.picked_rank = clicked;
    ImGui::Separator();
    draw_entries(st);
}

}  // namespace us::gui
