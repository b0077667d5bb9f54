// Memory from the trace: the per-rank timeline by category, each category's peak and the phase it fell in, and
// step 1 (which allocates gradients and optimizer state) against the steady steps.
#pragma once

#include <array>
#include <vector>

#include "engine/core/memory_category.h"
#include "profiler/trace/trace_store.h"

namespace us::prof {

using CategoryBytes = std::array<int64_t, kMemCategoryCount>;

struct MemoryPeaks {
    CategoryBytes peak{};               // max over the whole trace, per category
    std::array<Phase, kMemCategoryCount> peak_phase{};
    std::array<int64_t, kMemCategoryCount> peak_time{};
    int64_t total_peak = 0;             // peak of the sum
    Phase total_peak_phase = Phase::none;
    int total_peak_step = 0;
    CategoryBytes step1_peak{};         // within step 1
    CategoryBytes steady_peak{};        // within later steps (max)
    int64_t step1_total_peak = 0, steady_total_peak = 0;
    bool has_steady = false;
};

MemoryPeaks analyze_memory(const RankTrace& rank);

// Bytes of every category after each memory event: the timeline the memory anatomy view stacks.
struct MemorySample {
    int64_t t;
    CategoryBytes bytes;
    Phase phase;
    int32_t step;
};
std::vector<MemorySample> memory_timeline(const RankTrace& rank);

}  // namespace us::prof
