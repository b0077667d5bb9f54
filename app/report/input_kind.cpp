// What the paths given to the report or the GUI hold (input_kind.h).
#include "app/report/input_kind.h"

#include <algorithm>

#include "profiler/hang/dump_files.h"
#include "profiler/snapshot/memory_snapshot.h"

namespace us::app {

InputKind input_kind(const std::vector<std::string>& paths) {
    if (paths.empty()) return InputKind::traces;
    if (std::all_of(paths.begin(), paths.end(), hang::names_flight_dumps)) return InputKind::flight_dumps;
    if (std::all_of(paths.begin(), paths.end(), snap::is_memory_snapshot_path)) return InputKind::memory_snapshots;
    return InputKind::traces;
}

std::vector<std::string> leading_paths(int argc, char** argv) {
    std::vector<std::string> paths;
    for (int i = 1; i < argc && argv[i][0] != '-'; ++i) paths.emplace_back(argv[i]);
    return paths;
}

}  // namespace us::app
