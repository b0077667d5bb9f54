// Which of a run's ranks share a machine's cores, and whether the run itself asks more threads of them than there
// are cores. Ranks on one machine (the same kernel: RankDigest::machine, whatever their host names say, as nodes
// emulated in network namespaces have their own) share its cores; where their compute threads (each CPU rank's
// --threads) outnumber the CPUs their processes may use, the ranks take turns on the cores, and their waits for a
// core (core_wait.h) are the run's own as much as the machine's other load. The report, the pipeline bubble's
// misses, the diff and the GUI say so rather than blame "the machine's other load". Thread and CPU counts are the
// ranks' recorded settings and affinity (measured at their start); the verdict is derived.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/analysis/rank_digest.h"

namespace us::prof {

struct CoreSharing {
    std::vector<int> ranks;          // the run's CPU ranks on this machine, ascending
    std::vector<std::string> hosts;  // their host names, distinct (several where nodes are emulated on it)
    int threads = 0;                 // their compute threads, summed
    int cores = 0;                   // the CPUs their processes may run on, together (the union of their masks)
    bool oversubscribed() const { return threads > cores; }
};

// "0-3,8" -> {0, 1, 2, 3, 8}; empty where the list is malformed (it came from a trace: never trusted to be sane).
std::vector<int> parse_cpu_list(std::string_view list);

// One entry per machine with CPU ranks whose machine, CPUs and threads are all known (none for an imported or
// predicted run, or a trace from before they were recorded), in the order of their lowest rank.
std::vector<CoreSharing> core_sharing(const std::vector<RankDigest>& digests);

// The machine most oversubscribed (threads over cores), or nullptr where none is.
const CoreSharing* most_oversubscribed(const std::vector<CoreSharing>& machines);

// "this run's own 4 compute threads share 2 cores (ranks 0-3)" for the most oversubscribed machine; "" where none.
std::string oversubscribed_words(const std::vector<CoreSharing>& machines);

// [{"ranks", "hosts", "threads", "cores", "oversubscribed"}] (docs/report-schema.md).
nlohmann::json core_sharing_json(const std::vector<CoreSharing>& machines);

}  // namespace us::prof
