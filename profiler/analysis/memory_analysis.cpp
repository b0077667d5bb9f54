#include "profiler/analysis/memory_analysis.h"

#include <algorithm>

namespace us::prof {

MemoryPeaks analyze_memory(const RankTrace& rank) {
    MemoryPeaks m;
    CategoryBytes current{};
    int64_t total = 0;
    for (const MemoryPoint& p : rank.memory) {
        if (p.category >= kMemCategoryCount) continue;
        current[p.category] = p.category_bytes;
        total = 0;
        for (int64_t b : current) total += b;
        const size_t c = p.category;
        if (current[c] > m.peak[c]) {
            m.peak[c] = current[c];
            m.peak_phase[c] = p.phase;
            m.peak_time[c] = p.t;
        }
        if (total > m.total_peak) {
            m.total_peak = total;
            m.total_peak_phase = p.phase;
            m.total_peak_step = p.step;
        }
        CategoryBytes& per = p.step <= 1 ? m.step1_peak : m.steady_peak;
        int64_t& per_total = p.step <= 1 ? m.step1_total_peak : m.steady_total_peak;
        if (p.step > 1) m.has_steady = true;
        for (size_t k = 0; k < size_t(kMemCategoryCount); ++k) per[k] = std::max(per[k], current[k]);
        per_total = std::max(per_total, total);
    }
    return m;
}

std::vector<MemorySample> memory_timeline(const RankTrace& rank) {
    std::vector<MemorySample> out;
    out.reserve(rank.memory.size());
    CategoryBytes current{};
    for (const MemoryPoint& p : rank.memory) {
        if (p.category >= kMemCategoryCount) continue;
        current[p.category] = p.category_bytes;
        out.push_back({p.t, current, p.phase, p.step});
    }
    return out;
}

}  // namespace us::prof
