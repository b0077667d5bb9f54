// Memory from the trace: the per-rank timeline by category, each category's peak and the phase it fell in, step 1
// (which allocates gradients and optimizer state) against the steady steps, and what the process held beyond the
// tracked categories.
#pragma once

#include <algorithm>
#include <array>
#include <vector>

#include "common/core/memory_category.h"
#include "profiler/trace/trace_store.h"
#include "profiler/transport/rank_metadata.h"

namespace us::prof {

using CategoryBytes = std::array<int64_t, kMemCategoryCount>;

struct MemoryPeaks {
    CategoryBytes peak{};  // max over the whole trace, per category
    std::array<Phase, kMemCategoryCount> peak_phase{};
    std::array<int64_t, kMemCategoryCount> peak_time{};
    int64_t total_peak = 0;  // peak of the sum
    Phase total_peak_phase = Phase::none;
    int total_peak_step = 0;
    CategoryBytes step1_peak{};   // within step 1
    CategoryBytes steady_peak{};  // within later steps (max)
    int64_t step1_total_peak = 0, steady_total_peak = 0;
    bool has_steady = false;
};

MemoryPeaks analyze_memory(const RankTrace& rank);

// Which categories a prediction covers (Prediction::modelled_categories, the planner's MemoryEstimate::modelled).
using CategoryMask = std::array<bool, kMemCategoryCount>;
// The measured peaks of the `modelled` categories, summed: like for like with a prediction's sum of its categories
// (each category's own peak; peaks of different categories need not coincide, so this is not the peak of the sum).
// The one definition the report, the planner and the views read.
int64_t modelled_sum_of_peaks(const MemoryPeaks& measured, const CategoryMask& modelled);

// Bytes of every category after each memory event: the timeline the memory anatomy view stacks.
struct MemorySample {
    int64_t t;
    CategoryBytes bytes;
    Phase phase;
    int32_t step;
};
std::vector<MemorySample> memory_timeline(const RankTrace& rank);

// What the process held beside what the allocator tracked, sampled together (engine/backend/memory_sample.h).
// On a GPU the memory compared with the tracked (device) bytes is the device's in use, as the driver reports it
// (every process on the device); on a CPU the resident set.
struct ProcessSample {
    int64_t t = 0;
    int64_t tracked = 0;                                 // the allocator's live bytes (the categories' sum)
    int64_t reserved = 0;                                // those plus the freed blocks it keeps for reuse (its cache)
    int64_t resident = -1, heap = -1, device_used = -1;  // -1: not sampled
    int64_t held() const { return device_used >= 0 ? device_used : resident; }
    int64_t cached() const { return std::max<int64_t>(0, reserved - tracked); }
    // What no category and no cache accounts for (< 0: reserved pages not yet touched)
    int64_t untracked() const { return held() >= 0 ? held() - std::max(tracked, reserved) : 0; }
};
std::vector<ProcessSample> process_memory_timeline(const TraceStore& store, const RankTrace& rank);

struct ProcessMemoryPeaks {
    bool sampled = false;
    bool device = false;    // held = the device's memory in use (a GPU run)
    int64_t held_peak = 0;  // resident set (CPU) or device memory in use (GPU), peak
    int64_t resident_peak = 0, heap_peak = 0;
    int64_t untracked_peak = 0;            // held - the allocator's reserved bytes at the same sample, peak
    int64_t cached_at_untracked_peak = 0;  // the allocator's cache then (freed blocks kept for reuse)
    int64_t cached_peak = 0;
    // At that sample, on a CPU: of the untracked bytes, those malloc'd by others (heap in use - reserved: MPI,
    // BLAS, the runtime) and those outside malloc's live blocks (resident - heap: libraries' code and data, thread
    // stacks, shared memory, freed pages malloc keeps). -1 without a heap figure (a GPU run).
    int64_t untracked_in_heap = -1, untracked_outside_heap = -1;
    // A GPU rank: what the untracked bytes hold, named where the engine measured it (RankMetadata's
    // device_memory_parts: device-wide readings before and after each library started).
    std::vector<DeviceMemoryPart> named_untracked;
};
ProcessMemoryPeaks analyze_process_memory(const std::vector<ProcessSample>& samples);

}  // namespace us::prof
