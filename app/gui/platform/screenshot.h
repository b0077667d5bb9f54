// Screenshot mode: the framebuffer as a PNG, and beside it OUT.png.json with the pixel rectangles of the views,
// so that tests can check that each view drew something.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "app/gui/state/app_state.h"

namespace us::gui {

bool save_screenshot(const std::string& path, int width, int height, const std::map<std::string, ViewRegion>& regions,
                     const std::string& error_shown, const nlohmann::json& facts, std::string& why);

}  // namespace us::gui
