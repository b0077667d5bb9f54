#include "profiler/analysis/memory_analysis.h"

#include <algorithm>

namespace us::prof {

int64_t modelled_sum_of_peaks(const MemoryPeaks& measured, const CategoryMask& modelled) {
    int64_t sum = 0;
    for (int k = 0; k < kMemCategoryCount; ++k)
        if (modelled[size_t(k)]) sum += measured.peak[size_t(k)];
    return sum;
}

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

std::vector<ProcessSample> process_memory_timeline(const TraceStore& store, const RankTrace& rank) {
    auto points = [&](std::string_view name) -> const std::vector<CounterPoint>* {
        const uint32_t id = store.find_name(std::string(name));
        auto it = rank.counters.find(id);
        return it == rank.counters.end() ? nullptr : &it->second;
    };
    std::vector<ProcessSample> out;
    const auto* tracked = points(kTrackedCounter);
    if (!tracked) return out;
    // The counters of one sample are recorded one after another, tracked first: the k-th of each belongs to the
    // k-th sample, and none of them lies before its tracked point.
    const auto* resident = points(kProcessResidentCounter);
    const auto* heap = points(kProcessHeapCounter);
    const auto* device = points(kDeviceUsedCounter);
    const auto* reserved = points(kReservedCounter);
    auto value = [](const std::vector<CounterPoint>* v, size_t k) {
        return v && k < v->size() ? int64_t((*v)[k].value) : int64_t(-1);
    };
    for (size_t k = 0; k < tracked->size(); ++k) {
        ProcessSample p;
        p.t = (*tracked)[k].t;
        p.tracked = int64_t((*tracked)[k].value);
        p.reserved = std::max<int64_t>(p.tracked, value(reserved, k));
        p.resident = value(resident, k);
        p.heap = value(heap, k);
        p.device_used = value(device, k);
        out.push_back(p);
    }
    return out;
}

ProcessMemoryPeaks analyze_process_memory(const std::vector<ProcessSample>& samples) {
    ProcessMemoryPeaks m;
    for (const ProcessSample& p : samples) {
        if (p.held() < 0) continue;
        if (!m.sampled || p.untracked() > m.untracked_peak) {
            m.untracked_peak = p.untracked();
            const bool split = p.device_used < 0 && p.heap >= 0;
            m.cached_at_untracked_peak = p.cached();
            m.untracked_in_heap = split ? p.heap - std::max(p.tracked, p.reserved) : -1;
            m.untracked_outside_heap = split ? p.resident - p.heap : -1;
        }
        m.sampled = true;
        m.device = p.device_used >= 0;
        m.held_peak = std::max(m.held_peak, p.held());
        m.resident_peak = std::max(m.resident_peak, p.resident);
        m.heap_peak = std::max(m.heap_peak, p.heap);
        m.cached_peak = std::max(m.cached_peak, p.cached());
    }
    return m;
}

}  // namespace us::prof
