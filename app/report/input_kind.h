// What the paths given to `ultrascope report`, to `ultrascope TRACE` without a display, or to the GUI hold, told one
// way for all three: a hung job's Flight Recorder dumps, PyTorch memory snapshots, or traces (a .ustrace file,
// PyTorch profiler files or their folder). Dumps are told by their content first: torch names them without an
// extension, and a dump renamed .pickle is still a dump, not a snapshot.
#pragma once

#include <string>
#include <vector>

namespace us::app {

enum class InputKind { flight_dumps, memory_snapshots, traces };

// flight_dumps where any path names dumps (files, folders, globs: hang::names_flight_dumps; the hang report names
// the rest as left out), memory_snapshots where every path that exists is a snapshot (.pickle/.pkl, or its JSON
// form), else traces (whose reader says what is wrong).
InputKind input_kind(const std::vector<std::string>& paths);

// The arguments of a command line that are not flags (`report --json A B` -> A, B; a flag's value too, which
// input_kind passes over where it names no file).
std::vector<std::string> command_paths(int argc, char** argv);

}  // namespace us::app
