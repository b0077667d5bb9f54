// The memory anatomy's data, computed without a window: per pixel column the bytes of every category at the
// moment of the column's highest total (so a peak is never lost between pixels), the allocator's cache and the
// bytes no category tracks above them (from the process samples), the forward / backward / optimizer bands behind
// them, and the step boundaries.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "profiler/analysis/memory_analysis.h"

namespace us::gui {

struct MemoryColumn {
    std::array<int64_t, kMemCategoryCount> bytes{};
    int64_t total = 0;
    prof::Phase phase = prof::Phase::none;
    int32_t step = 0;
    bool has_data = false;  // before the rank's first event a column is empty
    // From the process sample in effect (fill_process_columns): what the process held (resident set, or the
    // device's memory in use) and the allocator's cache; held -1 without a sample. Samples come at phase
    // boundaries while the categories move with every allocation, so the bands above the categories are drawn up
    // to the sampled `held` and never past it.
    int64_t held = -1, cached = 0;
    int64_t cache_shown() const { return held < 0 ? 0 : std::min(cached, std::max<int64_t>(0, held - total)); }
    int64_t untracked_shown() const { return held < 0 ? 0 : std::max<int64_t>(0, held - total - cache_shown()); }
};

// `timeline` is memory_timeline(rank) (time-ordered). One column per pixel of [t0, t1).
std::vector<MemoryColumn> build_memory_columns(const std::vector<prof::MemorySample>& timeline, int64_t t0, int64_t t1,
                                               int width);

// Adds what the process held and the allocator's cache from the process sample in effect in each column (the one
// with the most untracked bytes among the samples within it). `samples` is process_memory_timeline(rank).
void fill_process_columns(std::vector<MemoryColumn>& columns, const std::vector<prof::ProcessSample>& samples,
                          int64_t t0, int64_t t1);

struct PhaseBand {
    int64_t begin, end;
    prof::Phase phase;
    int micro_batch;
};
// The rank's phase spans (compute lane) that intersect [t0, t1).
std::vector<PhaseBand> phase_bands(const prof::RankTrace& rank, int64_t t0, int64_t t1);
// Step boundaries (host lane step spans) in [t0, t1): (begin, step).
std::vector<std::pair<int64_t, int>> step_marks(const prof::RankTrace& rank, int64_t t0, int64_t t1);

// The sample in effect at time t (the last one at or before t), or nullptr.
const prof::MemorySample* sample_at(const std::vector<prof::MemorySample>& timeline, int64_t t);

}  // namespace us::gui
