// The one table of the GUI's views: each view's id (its `--view` name, its region in a screenshot's JSON, the name a
// lesson gives it), its window title, its tab label, where the default layout puts it and what draws it. The layout,
// the tabs, the screenshot mode, `--view` parsing, the lessons and the tests all read this list. Plain C++ with no
// ImGui, so code without a window (the command line, unit tests) reads the names too.
#pragma once

#include <string>
#include <string_view>

namespace us::gui {

// Where the default layout puts a view (app/gui/platform/frame_layout.cpp): the right of the window is the timeline
// across the top and three columns below it; the last column's views are tabs of one window ("Training and runs");
// the planner, the snapshot and the Attach window are closable windows over the views. What is open may move a view
// into the first column below the timeline, and the one there into the tabs (opening_layout.h).
enum class Place { top, bottom_left, bottom_middle, tab, over };

// X(id, title, tab label (as a tab: the tab views', and a view an opening layout moves into the tabs), place, draw
// function, shown flag (over only: a bool* of AppState `app`)). The order of the tabs is their order here.
#define US_GUI_VIEWS(X)                                                                         \
    X(memory, "Memory anatomy", "Memory", Place::bottom_left, draw_memory_view, nullptr)        \
    X(timeline, "Timeline", "", Place::top, draw_timeline_view, nullptr)                        \
    X(overlap, "Overlap and utilization", "", Place::bottom_middle, draw_overlap_view, nullptr) \
    X(training, "Training", "Training", Place::tab, draw_training_view, nullptr)                \
    X(compare, "Compare runs", "Compare", Place::tab, draw_compare_view, nullptr)               \
    X(experts, "Experts", "Experts", Place::tab, draw_experts_view, nullptr)                    \
    X(ops, "Ops", "Ops", Place::tab, draw_ops_view, nullptr)                                    \
    X(ranks, "Ranks", "Ranks", Place::tab, draw_ranks_view, nullptr)                            \
    X(hang, "Hang", "Hang", Place::tab, draw_hang_view, nullptr)                                \
    X(planner, "Planner", "", Place::over, draw_planner_view, &app.planner.open)                \
    X(snapshot, "Memory snapshot", "", Place::over, draw_snapshot_view, &app.snapshots.show)    \
    X(attach, "Attach to a PyTorch job", "", Place::over, draw_attach_view, &app.attach_job.open)

// A view without its drawing: what code without a window needs.
struct ViewName {
    const char* id;
    const char* title;  // the window's title (the view alone, or in its place in the layout)
    const char* tab;    // Place::tab: the tab's label
    Place place;
};

#define US_GUI_VIEW_NAME(id, title, tab, place, draw, shown) ViewName{#id, title, tab, place},
inline constexpr ViewName kViewNames[] = {US_GUI_VIEWS(US_GUI_VIEW_NAME)};
#undef US_GUI_VIEW_NAME

// The window whose tabs hold the Place::tab views; its region in a screenshot is the first tab's id.
inline constexpr const char* kTabbedWindowTitle = "Training and runs";
inline constexpr const char* kTabbedRegion = "training";
// `--view all`: the whole layout.
inline constexpr const char* kAllViews = "all";

inline const ViewName* find_view_name(std::string_view id) {
    for (const ViewName& v : kViewNames)
        if (id == v.id) return &v;
    return nullptr;
}

// "memory, timeline, ... or all": the views a message or a help line lists.
inline std::string view_name_list(const char* last_word = "or") {
    std::string out;
    for (const ViewName& v : kViewNames) out += std::string(out.empty() ? "" : ", ") + v.id;
    return out + " " + last_word + " " + kAllViews;
}

// The region a lesson's view is outlined in: a tab's is its window's; the planner and the snapshot have none
// (a lesson names only the views of the layout).
inline const char* lesson_region_of(std::string_view id) {
    const ViewName* v = find_view_name(id);
    if (!v || v->place == Place::over) return nullptr;
    return v->place == Place::tab ? kTabbedRegion : v->id;
}

}  // namespace us::gui
