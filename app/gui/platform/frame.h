// One frame of the window: the menu bar, the popups and the views in their layout (frame_layout.cpp). What the frame
// keeps from one frame to the next is a FrameState, owned by the window loop (window_loop.cpp) or a benchmark.
#pragma once

#include "app/gui/state/app_state.h"
#include "app/gui/platform/frame_stats.h"
#include "app/gui/widgets/popups.h"

namespace us::gui {

struct FrameState {
    Popups popups;
    bool show_lessons = false;  // the left column shows the Lessons tab (File > Lessons, or a lesson is open)
    float font_size_edit = 0;   // View > font size: the slider's value (0: not yet read from the theme)
    bool had_routing = false;   // the last frame's report had expert routing (the Experts tab comes forward once)
    FrameStats stats;           // time per view, for the frame benchmark
};

// The whole frame: menu, popups and the views in their layout. With force_layout the default layout is applied
// every frame (screenshots, benchmarks), so each view's region is known exactly.
void draw_frame(AppState& app, FrameState& frame, bool force_layout);

}  // namespace us::gui
