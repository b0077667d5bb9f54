// The test oracle of screenshot mode: what the window shows, as JSON beside the PNG (OUT.png.json's "shown"), so a
// test checks the figures on screen against the run without reading pixels (tests/gui/test_gui_smoke.cpp).
#pragma once

#include <nlohmann/json.hpp>

#include "app/gui/state/app_state.h"

namespace us::gui {

nlohmann::json shown_facts(const AppState& app);

}  // namespace us::gui
