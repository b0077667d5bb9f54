// One process group's state from its members' collectives: the window every member still holds (ring buffers wrap
// at different records), then where they stop agreeing — a mismatch inside the window, members that never entered
// the newest collective others entered (missing), everyone inside the newest one (inside_collective), or none.
#pragma once

#include <unordered_map>

#include "profiler/hang/group_alignment.h"
#include "profiler/hang/hang_analysis.h"

namespace us::hang {

// `dump_of_rank` maps a global rank to its index in set.dumps (absent ranks are not in it).
GroupState judge_group(const DumpSet& set, const GroupInstance& group, const CallSignatures& signatures,
                       const std::unordered_map<int, uint32_t>& dump_of_rank);

}  // namespace us::hang
