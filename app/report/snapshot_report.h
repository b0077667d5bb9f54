// The report of PyTorch CUDA memory snapshots (one per rank, `ultrascope report SNAPSHOT...`): what they say, as
// text or as {"memory_snapshot": {...}} (docs/pytorch-memory.md).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "profiler/snapshot/snapshot_set.h"

namespace us::app {

nlohmann::json snapshot_report_json(const std::vector<snap::RankSnapshot>& ranks);
std::string format_snapshot_report(const snap::RankSnapshot& rank);

}  // namespace us::app
