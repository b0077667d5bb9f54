// What a memory snapshot says, per device: the dump-time state from its segments; allocated and reserved bytes over
// the recorded trace (replayed, starting from the dump-time state minus what the trace did); the allocations alive at
// the peak, grouped by the user's frame that made them and by inferred category; fragmentation at the peak; OOMs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/snapshot/frame_rules.h"
#include "profiler/snapshot/memory_snapshot.h"

namespace us::snap {

// Where an allocation alive at the peak is known from.
enum class AllocationOrigin : uint8_t { traced, before_trace_freed_in_it, before_trace_alive_at_dump };
const char* origin_name(AllocationOrigin o);

struct PeakAllocation {
    uint64_t addr = 0;
    int64_t size = 0;
    uint32_t stack = 0;
    int64_t user_frame = -1;
    MemoryCategory category = MemoryCategory::unknown;
    AllocationOrigin origin = AllocationOrigin::traced;
};

struct SiteTotal {  // allocations at the peak made by one user frame
    int64_t frame = -1;
    int64_t bytes = 0, count = 0;
    MemoryCategory category = MemoryCategory::unknown;  // of its largest allocation
};

struct CategoryTotal {
    MemoryCategory category = MemoryCategory::unknown;
    int64_t bytes = 0, count = 0;
};

struct OomEvent {
    size_t entry = 0;
    int64_t time_us = -1, requested = 0, device_free = -1, allocated = 0, reserved = 0;
};

struct TimelineSample {  // the largest values over one slice of the trace
    size_t last_entry = 0;
    int64_t time_us = -1, allocated = 0, reserved = 0;
};

struct DeviceMemory {
    int device = 0;
    // At dump time, from the segments (measured by the allocator).
    int64_t reserved_bytes = 0, allocated_bytes = 0, active_bytes = 0, largest_free_block_at_dump = 0;
    size_t segments = 0;
    // Over the trace (allocated: handed out and not yet free_completed, as memory_viz's Active Memory Timeline).
    size_t trace_entries = 0;
    bool has_trace = false;
    bool start_known = true;  // false when the dump-time state cannot explain what the trace frees
    int64_t start_allocated = 0, start_reserved = 0;
    int64_t peak_allocated = 0, reserved_at_peak = 0, peak_reserved = 0;
    int64_t peak_entry = -1;  // the entry after which the peak holds; -1: at the trace's start
    int64_t peak_time_us = -1;
    int64_t free_in_segments_at_peak = 0;     // reserved - allocated at the peak
    int64_t largest_free_block_at_peak = -1;  // -1: unknown
    std::vector<PeakAllocation> at_peak;      // largest first
    std::vector<SiteTotal> sites;             // largest first
    std::vector<CategoryTotal> categories;
    std::vector<OomEvent> ooms;
    std::vector<TimelineSample> timeline;
    std::vector<std::string> notes;
};

struct SnapshotAnalysis {
    std::vector<DeviceMemory> devices;  // every device with segments or a trace
    int64_t reserved_bytes = 0, allocated_bytes = 0, active_bytes = 0, peak_allocated_bytes = 0;
    size_t segments = 0, trace_entries = 0;
    bool peak_known = false;  // some device had a trace
};

SnapshotAnalysis analyze_snapshot(const MemorySnapshot& snap, size_t timeline_samples = 64);

}  // namespace us::snap
