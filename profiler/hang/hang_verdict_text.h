// The verdict in words: one sentence first (the rank or node, the group, the collective, the line of code), then
// the evidence, one line each — what every other hung group waits on, ranks without a dump, injected faults.
#pragma once

#include <string>

#include "profiler/hang/hang_analysis.h"

namespace us::hang {

// Fills a.verdict and a.evidence from the rest of the analysis.
void write_verdict(HangAnalysis& a);

// "rank 3", "ranks 0, 1 and 2".
std::string rank_list(const std::vector<int>& ranks);
// "group 1 (tp)", or "group '' (default_pg)".
std::string group_label(const GroupState& g);
std::string group_label(const std::string& name, const std::string& desc);  // "group '0' (default_pg)"
// "train.py:42 in forward", or "" for no frames: the innermost frame that is not the library's own.
std::string frame_label(const std::vector<StackFrame>& stack);

}  // namespace us::hang
