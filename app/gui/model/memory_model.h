// The memory anatomy's data, computed without a window: per pixel column the bytes of every category at the
// moment of the column's highest total (so a peak is never lost between pixels), the forward / backward /
// optimizer bands behind them, and the step boundaries.
#pragma once

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
};

// `timeline` is memory_timeline(rank) (time-ordered). One column per pixel of [t0, t1).
std::vector<MemoryColumn> build_memory_columns(const std::vector<prof::MemorySample>& timeline, int64_t t0, int64_t t1,
                                               int width);

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
