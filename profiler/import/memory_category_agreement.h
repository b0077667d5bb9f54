// How often our inferred categories (kineto_memory_ops.h: from the CPU ops around each [memory] event) agree with
// the memory profiler's measured ones (memory_timeline.h) on the same run, by bytes over time: at every moment of
// the timeline, the bytes allocated since it began, per category, inferred against measured.
#pragma once

#include <array>
#include <cstdint>

#include "profiler/import/kineto_memory_ops.h"
#include "profiler/import/memory_timeline.h"

namespace us::prof {

// Which categories count as the same. strict: the profiler's eight. grouped: gradient and autograd detail are one
// (our "gradients and backward temporaries": the autograd engine allocates both), the rest as they are.
enum class AgreementGrouping : uint8_t { strict, grouped };

struct CategoryAgreement {
    // Σ over the timeline's intervals of duration × Σ_c min(inferred_c, measured_c), over Σ duration ×
    // max(Σ inferred, Σ measured): 1 when both say the same bytes of each category all the time.
    double byte_time = 0;
    double at_peak = 0;  // the same at the row where the measured total (since the timeline began) peaks
    int64_t measured_peak_bytes = 0, inferred_bytes_at_peak = 0;
    size_t events_used = 0, rows = 0;
    // Bytes allocated, by inferred category (row) and the category the timeline gave them when allocated (column):
    // the allocation is matched to a rise of exactly its bytes at its microsecond. Unmatched allocations: column 8.
    std::array<std::array<int64_t, kProfilerCategories + 1>, kProfilerCategories> allocated{};
};

// `device`: the timeline's device as a [memory] "Device Id" (-1 host memory). Only events of that device count.
CategoryAgreement compare_categories(const KinetoMemoryEvents& inferred, const MemoryTimeline& measured, int device,
                                     AgreementGrouping grouping);

}  // namespace us::prof
