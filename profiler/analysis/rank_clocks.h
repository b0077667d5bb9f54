// The ranks' clock offsets for blame (blame.h): the trace's where it gives them, else estimated from the
// collectives' ends, which fall at about one moment on every rank of a collective.
#pragma once

#include <vector>

#include "profiler/analysis/blame.h"

namespace us::prof {

// One entry per digest, in the digests' order; `read[i]`: whether instance i's collectives are read, steps from
// `first_step`.
std::vector<RankClock> clocks_of(const std::vector<RankDigest>& digests, const CollectiveMatches& m,
                                 const std::vector<bool>& read, int first_step);

}  // namespace us::prof
