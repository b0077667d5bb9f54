// One rank's Flight Recorder entries as the Hang view's table shows them when a rank is clicked: every entry its ring
// buffer holds, newest first (a hang is at the end of the ring), each resolved to text: record id, group, sequence
// id, op, sizes, dtypes, state and times. Measured: the dump's own fields, nothing inferred.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/hang/hang_analysis.h"

namespace us::gui {

struct HangEntryRow {
    int64_t record_id = 0;
    std::string group;        // "t0 (tp)"
    std::string seq;          // "#42", or "p2p #3"
    std::string op;           // the profiling name, "nccl:all_reduce"
    std::string sizes;        // "[1024] -> [1024]"
    std::string dtypes;       // "Float -> Float"
    std::string state;        // "scheduled", "started", "completed", "scheduled, retired"
    std::string created;      // "+12.345 s": from the rank's oldest entry held
    std::string took;         // created to completed where recorded, "device 3.2 ms" with timing on; "-" otherwise
    bool in_group = false;    // an entry of the group the view shows
    bool divergence = false;  // the group's first divergence
};

// `rank`'s entries, newest first; `group` (an index in a.groups, -1 none) marks the rows of the group shown.
std::vector<HangEntryRow> hang_rank_entries(const hang::HangAnalysis& a, const hang::DumpSet& set, int rank, int group);

}  // namespace us::gui
