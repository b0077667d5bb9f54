// A run's memory as the diff and the Compare view set two runs side by side: the largest peak of each category
// over the ranks, and of their sum ("peak of the sum": what a rank held at once at its worst, which a category
// moved from one place to another does not change).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "profiler/analysis/report.h"

namespace us::prof {

// The key of the peak of the sum among the categories' names.
inline constexpr const char* kPeakOfSum = "peak of the sum";

// Every category the engine tracks (0 where no rank held any) and the peak of the sum, each the largest over the
// ranks, measured; empty for an imported run (a PyTorch trace has no categories): unknown, not zero.
std::map<std::string, int64_t> memory_peaks_of(const Report& report);

}  // namespace us::prof
