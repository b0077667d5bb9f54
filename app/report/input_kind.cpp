// What the paths given to the report or the GUI hold (input_kind.h).
#include "app/report/input_kind.h"

#include <algorithm>
#include <filesystem>

#include "profiler/hang/dump_files.h"
#include "profiler/snapshot/memory_snapshot.h"

namespace us::app {

InputKind input_kind(const std::vector<std::string>& paths) {
    // Any dump makes them dumps: a shell's glob of a dumps' folder brings its notes and an empty file of a rank
    // that died writing, which the hang report names as left out (a trace reader would refuse them all).
    if (std::any_of(paths.begin(), paths.end(), hang::names_flight_dumps)) return InputKind::flight_dumps;
    std::vector<std::string> existing;  // a flag's value (4, a machine file) among them is not a path to open
    std::error_code ec;
    for (const std::string& p : paths)
        if (std::filesystem::exists(p, ec)) existing.push_back(p);
    if (!existing.empty() && std::all_of(existing.begin(), existing.end(), snap::is_memory_snapshot_path))
        return InputKind::memory_snapshots;
    return InputKind::traces;
}

std::vector<std::string> command_paths(int argc, char** argv) {
    std::vector<std::string> paths;
    for (int i = 1; i < argc; ++i)
        if (argv[i][0] != '-') paths.emplace_back(argv[i]);
    return paths;
}

}  // namespace us::app
