// A node, not a rank (docs/blame.md): when every rank of one host is slow (a hot or throttled machine, a slower GPU
// model, a noisy neighbour), its ranks take turns arriving last, so none of them stands out alone and the rank rule
// says "nothing stands out". Summed by host, their waiting passes the same rules (BlameRules) against the next host's.
#pragma once

#include <string>
#include <vector>

#include "profiler/analysis/blame.h"

namespace us::prof {

// Where no rank stands out alone, names the node whose ranks together pass `rules` (b.node): every rank of the
// node (two or more) made others wait, the ranks' hosts are all known and there are two hosts or more. Its ranks'
// stragglers stand out and b.culprit is set. Reads b.stragglers and b.waits: call it after the rank rule.
void name_node(const std::vector<RankDigest>& digests, const BlameRules& rules, Blame& b);

// "node gpu-b (ranks 4-7) holds the run back: ..."
std::string node_verdict(const NodeBlame& node);

// Ranks as ranges: "rank 3", "ranks 4-7", "ranks 0, 2, 5-7".
std::string rank_ranges(const std::vector<int>& sorted_ranks);

}  // namespace us::prof
