// The desktop GUI: Dear ImGui on GLFW + OpenGL 3. run_gui owns the window loop (window_loop.cpp); everything it
// draws comes from AppState and the view-models in model/.
#pragma once

#include "app/gui/options/gui_options.h"

namespace us::gui {

// Whether a display is available (X11 or Wayland).
bool display_available();
// Returns the process exit code.
int run_gui(const GuiOptions& options);

}  // namespace us::gui
