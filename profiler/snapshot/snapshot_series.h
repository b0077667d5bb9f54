// One device's snapshot trace as running totals, for drawing any slice of it: allocated and reserved after every
// entry, and the allocated bytes by inferred category (frame_rules.h), re-sampled for the window shown so that a
// zoomed-out view of 1,000,000 entries costs one pass and a zoomed-in one shows single allocations.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "profiler/snapshot/frame_rules.h"
#include "profiler/snapshot/snapshot_analysis.h"

namespace us::snap {

inline constexpr size_t kSnapshotCategories = size_t(MemoryCategory::unknown) + 1;
using CategoryBytes = std::array<int64_t, kSnapshotCategories>;

struct SnapshotSeries {
    static constexpr size_t kCheckpointEvery = 4096;
    int device = 0;
    std::vector<int64_t> allocated, reserved;  // after each entry, the derived start included
    std::vector<int64_t> delta;                // the allocated bytes entry i adds (< 0: frees) ...
    std::vector<uint8_t> category;             // ... to this category (MemoryCategory)
    // By category at the trace's start: what the trace frees that it did not allocate, and what the dump holds that no
    // traced allocation explains, each by its stack's category; the rest of the derived start is unknown.
    CategoryBytes start{};
    std::vector<CategoryBytes> checkpoints;  // the state before entry k * kCheckpointEvery

    size_t size() const { return allocated.size(); }
};

// Built from the analysis of the same device (its derived start); empty when the device has no trace.
SnapshotSeries build_series(const MemorySnapshot& snap, const DeviceMemory& m);

// Each category's own largest bytes over the whole trace (they need not peak together).
CategoryBytes category_peaks(const SnapshotSeries& s);

struct SeriesSample {  // one slice of the window, at the moment its allocated bytes are largest
    size_t first_entry = 0, last_entry = 0, peak_entry = 0;
    int64_t allocated = 0, reserved = 0;  // reserved: the largest in the slice
    CategoryBytes by_category{};          // at peak_entry
};

// Entries [e0, e1) cut into at most `buckets` slices (one per entry when fewer entries than buckets).
std::vector<SeriesSample> sample_window(const SnapshotSeries& s, size_t e0, size_t e1, size_t buckets);

}  // namespace us::snap
