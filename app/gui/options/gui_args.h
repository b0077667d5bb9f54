// The GUI's command line, `ultrascope [TRACE...] [GUI options] [training flags]`, parsed with CLI11 like every other
// command. The GUI's own options fill GuiOptions; an argument that names an existing file or folder (and is not the
// value of a training flag) is a trace to open; everything else is passed through, in order, to the launched run
// (ultrascope-train's flags, whose arity comes from the trainer's own flag table, common/settings/cli.h).
#pragma once

#include <string>

#include "app/gui/options/gui_options.h"

namespace us::app {

struct GuiArgs {
    gui::GuiOptions options;
    bool help_requested = false;  // --help: print gui_args_help() and exit
};

// argv[0] is the program. Throws UserError on a bad value (a named lesson that does not exist included).
GuiArgs parse_gui_args(int argc, const char* const* argv);

// The GUI options' help, one line each (for `ultrascope --help`).
std::string gui_args_help();

}  // namespace us::app
