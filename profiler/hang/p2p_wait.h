// Point-to-point waits: unfinished sends and receives pair up per channel (group, from, to) in the order posted, as
// the libraries match them; what pairs is a transfer in flight. A rank waits on the peer of its oldest unpaired
// operation; a peer that waits on nothing never posted its side, and waits that close a loop are a deadlock. Ranks with
// no p2p recorded (gloo records none) take no part.
#pragma once

#include <unordered_map>

#include "profiler/hang/group_alignment.h"
#include "profiler/hang/hang_analysis.h"

namespace us::hang {

// Marks, in `states` (one per aligned group), each group whose sends and receives deadlock (p2p_deadlock, the
// cycle's ranks as culprits) or whose rank waits on a peer that never posted its side (missing), unless the group
// already has a collective verdict.
void judge_p2p(const DumpSet& set, const AlignedGroups& aligned, std::vector<GroupState>& states,
               const std::unordered_map<int, uint32_t>& dump_of_rank);

}  // namespace us::hang
