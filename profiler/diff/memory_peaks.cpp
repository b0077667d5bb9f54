// A run's memory peaks by category for the diff (memory_peaks.h).
#include "profiler/diff/memory_peaks.h"

#include <algorithm>

namespace us::prof {

std::map<std::string, int64_t> memory_peaks_of(const Report& report) {
    std::map<std::string, int64_t> out;
    if (report.imported || report.ranks.empty()) return out;
    for (size_t c = 0; c < kMemCategoryCount; ++c) out[std::string(kMemCategoryNames[c])] = 0;
    out[kPeakOfSum] = 0;
    for (const RankReport& rank : report.ranks) {
        for (size_t c = 0; c < kMemCategoryCount; ++c) {
            int64_t& peak = out[std::string(kMemCategoryNames[c])];
            peak = std::max(peak, rank.memory.peak[c]);
        }
        out[kPeakOfSum] = std::max(out[kPeakOfSum], rank.memory.total_peak);
    }
    return out;
}

}  // namespace us::prof
