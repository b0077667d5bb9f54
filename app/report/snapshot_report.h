// `ultrascope report SNAPSHOT...`: what PyTorch CUDA memory snapshots (one per rank) say, as text or as
// {"memory_snapshot": {...}} (docs/pytorch-memory.md).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "profiler/snapshot/snapshot_analysis.h"

namespace us::app {

// Prints the report of every snapshot (a UserError names the file); returns the exit code.
int snapshot_report(const std::vector<std::string>& paths, bool json);
// `ultrascope report SNAPSHOT... [--json]` (argv[0] is "report").
int snapshot_report_command(int argc, char** argv);

struct LoadedSnapshot {
    snap::MemorySnapshot snapshot;
    snap::SnapshotAnalysis analysis;
};
nlohmann::json snapshot_report_json(const std::vector<LoadedSnapshot>& ranks);
std::string format_snapshot_report(const LoadedSnapshot& s);

}  // namespace us::app
