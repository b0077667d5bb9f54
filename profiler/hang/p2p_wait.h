// Point-to-point waits: each rank's oldest unfinished send or receive names the peer it waits on. A pair whose
// operations answer each other (a send to B and B's receive from A) is a transfer in flight; otherwise the rank
// waits on its peer, and waits that close a loop are a deadlock. Ranks with no p2p recorded (gloo records none)
// take no part.
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
