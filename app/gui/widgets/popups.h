// The window's modal popups (File > Open trace, File > Attach, Help > Shortcuts) and the keyboard shortcuts that
// open them. What they keep between frames (the text being typed, a request to open) lives in `Popups`, owned by
// the frame (frame.h).
#pragma once

#include "app/gui/state/app_state.h"

namespace us::gui {

struct Popups {
    bool open_requested = false, attach_requested = false, help_requested = false;  // opened on the next frame
    char open_path[1024] = "";                                                      // Open trace: the path being typed
    char attach_listen[128] = "127.0.0.1:7777";                                     // Attach: [HOST:]PORT to listen on
};

// Ctrl+O (open), Ctrl+R (relaunch), Ctrl+S (stop), unless a text field has the keyboard.
void handle_global_keys(AppState& app, Popups& popups);
// The popups that were requested, and those already open.
void draw_popups(AppState& app, Popups& popups);

}  // namespace us::gui
