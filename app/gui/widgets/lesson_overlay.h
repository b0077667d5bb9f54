// What an open lesson adds over the views: the views it names come forward once, and each is outlined with the
// lesson's notes in a box at its top right (where to look). The Lesson tab itself is views/lessons_panel.cpp.
#pragma once

#include "app/gui/state/app_state.h"

namespace us::gui {

// The tab flags that bring a lesson's view forward once, when the lesson opens or launches a run.
int lesson_tab_flags(const AppState& app, const char* view);
// Outlines the views the lesson points at, over everything (foreground draw list), once the regions are known.
void draw_lesson_highlights(AppState& app);

}  // namespace us::gui
