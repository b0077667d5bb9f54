// What the paths given to `ultrascope report`, to `ultrascope TRACE` without a display, or to the GUI hold, told one
// way for all three: a hung job's Flight Recorder dumps, PyTorch memory snapshots, or traces (a .ustrace file,
// PyTorch profiler files or their folder). Dumps are told by their content first: torch names them without an
// extension, and a dump renamed .pickle is still a dump, not a snapshot.
#pragma once

#include <string>
#include <vector>

namespace us::app {

enum class InputKind { flight_dumps, memory_snapshots, traces };

// flight_dumps where every path names dumps (files, folders, globs: hang::names_flight_dumps), memory_snapshots
// where every path is a snapshot (.pickle/.pkl, or its JSON form), else traces (whose reader says what is wrong).
InputKind input_kind(const std::vector<std::string>& paths);

// The paths a command line names: its arguments before the first flag (`report A B --json` -> A, B).
std::vector<std::string> leading_paths(int argc, char** argv);

}  // namespace us::app
