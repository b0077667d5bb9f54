// One frame (frame.h): the menu bar, the popups, and the views where the default layout puts them: the run panel
// (and a lesson's tab) on the left, the timeline across the top, memory, overlap and the tabbed curves below, the
// planner and a memory snapshot over them when open. `--view V` with a screenshot draws V alone, filling the window.
// Which views there are, their titles and places come from the table in view_table.h.
#include <GLFW/glfw3.h>
#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "app/gui/platform/frame.h"
#include "app/gui/widgets/lesson_overlay.h"
#include "app/gui/widgets/theme.h"
#include "app/gui/model/opening_layout.h"
#include "app/gui/model/view_table.h"
#include "app/gui/views/views.h"

namespace us::gui {

namespace {

// view_table.h's list with what draws each view, and for the closable ones the flag that shows them.
struct ViewSpec {
    ViewName name;
    void (*draw)(AppState&);
    bool* (*shown)(AppState&);  // Place::over: the window's open flag
};
#define US_GUI_VIEW_SPEC(id, title, tab, place, draw, shown_flag) \
    ViewSpec{ViewName{#id, title, tab, place}, draw, [](AppState& app) -> bool* { return (void)app, shown_flag; }},
const ViewSpec kViews[] = {US_GUI_VIEWS(US_GUI_VIEW_SPEC)};
#undef US_GUI_VIEW_SPEC

struct Rect {
    float x, y, w, h;
};

void record_region(AppState& app, const char* key) {
    const ImVec2 p = ImGui::GetWindowPos(), s = ImGui::GetWindowSize();
    app.regions[key] = ViewRegion{p.x, p.y, s.x, s.y};
}

// With `force` (screenshot mode) the layout is applied every frame, so the regions are known exactly; otherwise
// only the first time (then the user's, saved in imgui.ini).
void place(const char* title, Rect r, bool force) {
    const ImGuiCond cond = force ? ImGuiCond_Always : ImGuiCond_FirstUseEver;
    ImGui::SetNextWindowPos(ImVec2(r.x, r.y), cond);
    ImGui::SetNextWindowSize(ImVec2(r.w, r.h), cond);
}

ImGuiWindowFlags fixed_flags(bool force_layout) {
    return force_layout ? ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize : 0;
}

// A view in a window of its own, its region recorded and its drawing timed.
void view_window(AppState& app, FrameState& frame, const ViewSpec& v, Rect r, bool force_layout) {
    place(v.name.title, r, force_layout);
    // Dumps just in (opened, or a live run's that hung): the Hang view comes to the front.
    if (std::string_view(v.name.id) == "hang" && app.hang.take_bring_forward()) ImGui::SetNextWindowFocus();
    if (ImGui::Begin(v.name.title, nullptr, fixed_flags(force_layout))) {
        record_region(app, v.name.id);
        const auto t0 = std::chrono::steady_clock::now();
        v.draw(app);
        frame.stats.add_view_ms(v.name.id, ms_since(t0));
    }
    ImGui::End();
}

// The menu bar; returns its height.
float draw_menu_bar(AppState& app, FrameState& frame) {
    float menu_h = 0;
    if (!ImGui::BeginMainMenuBar()) return menu_h;
    if (ImGui::BeginMenu("File")) {
        if (ImGui::MenuItem("Open trace...", "Ctrl+O")) frame.popups.open_requested = true;
        if (ImGui::MenuItem("Attach (listen for a run)...")) frame.popups.attach_requested = true;
        if (ImGui::MenuItem("Attach to a PyTorch job...")) app.attach_job.show();
        if (ImGui::MenuItem("New plan...")) app.planner.open = true;
        if (ImGui::MenuItem("Lessons...")) {
            app.lessons.close();
            frame.show_lessons = true;
        }
        if (ImGui::MenuItem("Detach", nullptr, false, app.source.kind() == Source::attached)) app.detach();
        ImGui::Separator();
        if (ImGui::MenuItem("Quit")) glfwSetWindowShouldClose(glfwGetCurrentContext(), 1);
        ImGui::EndMenu();
    }
    if (ImGui::BeginMenu("View")) {
        ImGui::MenuItem("Follow the live run", "L", &app.window.follow);
        if (ImGui::MenuItem("Fit the whole trace", "A")) app.fit_all();
        ImGui::Separator();
        if (frame.font_size_edit <= 0) frame.font_size_edit = font_px();
        ImGui::SetNextItemWidth(em(120));
        ImGui::SliderFloat("font size", &frame.font_size_edit, 10.0f, 48.0f, "%.0f px");
        if (ImGui::IsItemDeactivatedAfterEdit())
            request_font_px(std::round(frame.font_size_edit));  // rebuilt after the frame
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("Larger for a projector; --font-size PX at start");
        if (bool on = high_contrast(); ImGui::Checkbox("high contrast", &on)) set_high_contrast(on);
        if (ImGui::IsItemHovered())
            ImGui::SetTooltip("For a projector: black on white, stronger lines; --high-contrast at start");
        ImGui::EndMenu();
    }
    if (ImGui::BeginMenu("Help")) {
        if (ImGui::MenuItem("Shortcuts")) frame.popups.help_requested = true;
        ImGui::EndMenu();
    }
    ImGui::SameLine(ImGui::GetWindowWidth() * 0.35f);
    ImGui::TextColored(ImVec4(0.75f, 0.8f, 0.9f, 1), "%s", app.source.label().c_str());
    if (const auto p = app.source.load_progress()) {  // a run being opened, its ranks shown as they are read
        ImGui::SameLine();
        ImGui::TextColored(ImVec4(0.9f, 0.8f, 0.5f, 1), "reading: %zu of %zu files, %.0f of %.0f MB, %.1f s%s",
                           p->files_done, p->files_total, double(p->bytes_read) / 1e6, double(p->bytes_total) / 1e6,
                           p->seconds, p->files_failed ? " (some failed: see the log)" : "");
    }
    menu_h = ImGui::GetWindowSize().y;
    ImGui::EndMainMenuBar();
    return menu_h;
}

// The left column: the run panel, and the Lessons tab when lessons are open.
void draw_left_column(AppState& app, FrameState& frame, Rect r, bool force_layout) {
    place("Run", r, force_layout);
    if (ImGui::Begin("Run", nullptr, fixed_flags(force_layout))) {
        record_region(app, "launch");
        if (app.lessons.current()) frame.show_lessons = true;
        if (!frame.show_lessons) {
            draw_launch_panel(app);
        } else if (ImGui::BeginTabBar("left")) {
            if (ImGui::BeginTabItem("Lesson", nullptr, app.lessons.views_pending ? ImGuiTabItemFlags_SetSelected : 0)) {
                ImGui::BeginChild("lesson");
                record_region(app, "lesson");
                draw_lessons_panel(app);
                ImGui::EndChild();
                ImGui::EndTabItem();
            }
            if (ImGui::BeginTabItem("Run")) {
                draw_launch_panel(app);
                ImGui::EndTabItem();
            }
            ImGui::EndTabBar();
        }
    }
    ImGui::End();
}

// The flags of a view's tab: a lesson's views come forward once; so does the experts' tab when a
// mixture-of-experts run's routing first shows.
ImGuiTabItemFlags tab_flags(const AppState& app, FrameState& frame, const ViewName& v) {
    if (std::string_view(v.id) == "experts") {
        const bool moe = !app.report().routing.empty(), bring_forward = moe && !frame.had_routing;
        frame.had_routing = moe;
        if (bring_forward) return ImGuiTabItemFlags_SetSelected;
    }
    return lesson_tab_flags(app, v.id);
}

// The window of the views the layout makes tabs: one tab each, the table's tab views in its order, then a view the
// layout moved there from beside the timeline; timed as a whole.
void draw_tabbed_window(AppState& app, FrameState& frame, const OpeningLayout& layout, Rect r, bool force_layout) {
    const auto t0 = std::chrono::steady_clock::now();
    place(kTabbedWindowTitle, r, force_layout);
    if (ImGui::Begin(kTabbedWindowTitle, nullptr, fixed_flags(force_layout))) {
        record_region(app, kTabbedRegion);
        if (ImGui::BeginTabBar("curves")) {
            for (const bool moved : {false, true})
                for (const ViewSpec& v : kViews) {
                    if (place_in(layout, v.name) != Place::tab || (v.name.place != Place::tab) != moved) continue;
                    if (ImGui::BeginTabItem(v.name.tab, nullptr, tab_flags(app, frame, v.name))) {
                        v.draw(app);
                        ImGui::EndTabItem();
                    }
                }
            ImGui::EndTabBar();
        }
    }
    ImGui::End();
    frame.stats.add_view_ms(kTabbedRegion, ms_since(t0));
}

// A closable window over the views (the planner, a memory snapshot): the measured views stay underneath.
void draw_over_window(AppState& app, const ViewSpec& v, Rect r, bool force_layout) {
    bool* shown = v.shown(app);
    if (!shown || !*shown) return;
    place(v.name.title, r, force_layout);
    if (ImGui::Begin(v.name.title, shown, fixed_flags(force_layout))) {
        record_region(app, v.name.id);
        v.draw(app);
    }
    ImGui::End();
}

}  // namespace

void draw_frame(AppState& app, FrameState& frame, bool force_layout) {
    const float menu_h = draw_menu_bar(app, frame);
    handle_global_keys(app, frame.popups);
    draw_popups(app, frame.popups);

    const ImGuiIO& io = ImGui::GetIO();
    const float W = io.DisplaySize.x, H = io.DisplaySize.y - menu_h, y0 = menu_h;
    const std::string& only = app.options().view;
    if (only != kAllViews && force_layout) {  // a single view filling the window (screenshots of one view)
        for (const ViewSpec& v : kViews)
            if (only == v.name.id) view_window(app, frame, v, Rect{0, y0, W, H}, force_layout);
        return;
    }
    // The left column (the run panel, a lesson's text and claims) grows with the font, up to over a third of the
    // window at a projector's sizes, where 340 px showed a lesson's first paragraph only.
    const float left = std::min(em(340), W * (font_px() > 20 ? 0.36f : 0.27f)), top_h = H * 0.42f;
    const float rest_w = W - left, bottom_h = H - top_h;
    const auto rect_of = [&](Place p) {
        switch (p) {
            case Place::top:
                return Rect{left, y0, rest_w, top_h};
            case Place::bottom_left:
                return Rect{left, y0 + top_h, rest_w * 0.42f, bottom_h};
            case Place::bottom_middle:
                return Rect{left + rest_w * 0.42f, y0 + top_h, rest_w * 0.26f, bottom_h};
            case Place::tab:
                return Rect{left + rest_w * 0.68f, y0 + top_h, rest_w * 0.32f, bottom_h};
            case Place::over:
                break;
        }
        return Rect{left, y0, rest_w, H};
    };
    // What is open chooses where the views go (model/opening_layout.h): a multi-rank trace's Ranks view beside the
    // timeline, an engine run's memory view.
    const OpeningLayout& layout = app.layout();
    draw_left_column(app, frame, Rect{0, y0, left, H}, force_layout);
    // windows are created in this order (top, then the bottom row left to right), so the last one has the focus
    for (const Place p : {Place::top, Place::bottom_left, Place::bottom_middle})
        for (const ViewSpec& v : kViews)
            if (place_in(layout, v.name) == p) view_window(app, frame, v, rect_of(p), force_layout);
    draw_tabbed_window(app, frame, layout, rect_of(Place::tab), force_layout);
    for (const ViewSpec& v : kViews)
        if (v.name.place == Place::over) draw_over_window(app, v, rect_of(Place::over), force_layout);
    draw_lesson_highlights(app);
    app.lessons.views_pending = false;
}

}  // namespace us::gui
