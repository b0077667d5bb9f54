// A lesson's marks over the views (lesson_overlay.h).
#include "app/gui/widgets/lesson_overlay.h"

#include <imgui.h>

#include <map>
#include <string>
#include <vector>

#include "app/gui/widgets/theme.h"
#include "app/gui/model/view_table.h"

namespace us::gui {

// The tab flags that bring a lesson's view forward once, when the lesson opens or launches a run.
int lesson_tab_flags(const AppState& app, const char* view) {
    const lesson::Lesson* l = app.lessons.current();
    if (!l || !app.lessons.views_pending) return 0;
    for (const auto& v : l->views)
        if (v == view) return ImGuiTabItemFlags_SetSelected;
    return 0;
}

// Outlines each view a lesson points at, with its notes in a box at the view's top right: where to look (the box
// fades under the mouse). Only over the lesson's own runs (LessonPlayer::highlights).
void draw_lesson_highlights(AppState& app) {
    std::map<std::string, std::vector<std::string>> notes;
    for (const lesson::Highlight* h : app.lessons.highlights(app))
        if (const char* key = lesson_region_of(h->view)) notes[key].push_back(h->note);
    ImDrawList* dl = ImGui::GetForegroundDrawList();
    const ImU32 accent = IM_COL32(255, 200, 40, 255);
    for (const auto& [key, lines] : notes) {
        const auto it = app.regions.find(key);
        if (it == app.regions.end() || it->second.w <= 0) continue;
        const ViewRegion& r = it->second;
        dl->AddRect(ImVec2(r.x + 1, r.y + 1), ImVec2(r.x + r.w - 1, r.y + r.h - 1), accent, 4.0f, 0, 3.0f);
        std::string text;
        for (const auto& line : lines) text += (text.empty() ? "look: " : "\nlook: ") + line;
        const ImVec2 size = ImGui::CalcTextSize(text.c_str(), nullptr, false, r.w * 0.6f);
        const ImVec2 at(r.x + r.w - size.x - em(14), r.y + ImGui::GetFrameHeight() + em(4));
        const ImVec2 b0(at.x - em(6), at.y - em(4)), b1(at.x + size.x + em(6), at.y + size.y + em(4));
        // The box covers part of the view: under the mouse it all but fades, so that what it covers can be read.
        const ImVec2 mouse = ImGui::GetIO().MousePos;
        const bool under_mouse = mouse.x >= b0.x && mouse.x < b1.x && mouse.y >= b0.y && mouse.y < b1.y;
        const int alpha = under_mouse ? 40 : 225;
        dl->AddRectFilled(b0, b1, IM_COL32(40, 32, 0, alpha), 4.0f);
        dl->AddRect(b0, b1, (accent & ~IM_COL32_A_MASK) | (ImU32(under_mouse ? 90 : 255) << IM_COL32_A_SHIFT), 4.0f);
        dl->AddText(nullptr, 0.0f, at,
                    (accent & ~IM_COL32_A_MASK) | (ImU32(under_mouse ? 70 : 255) << IM_COL32_A_SHIFT), text.c_str(),
                    nullptr, r.w * 0.6f);
        app.regions[std::string("highlight ") + key] = ViewRegion{at.x, at.y, size.x, size.y};
    }
}

}  // namespace us::gui
