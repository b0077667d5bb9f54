// The `[memory]` events of a Kineto trace one by one (torch.profiler(profile_memory=True): each allocation and free
// with its bytes and address), each with the category its enclosing CPU ops suggest: optimizer step -> optimizer
// state, backward (the autograd engine) -> gradient, forward / an nn.Module -> activation, the data loader -> input,
// parameter creation -> parameter, else unknown. Inferred from names, never measured (docs/pytorch-memory.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/import/memory_timeline.h"

namespace us::prof {

struct KinetoMemoryEvent {
    int64_t t_ns = 0;   // the trace's ts
    int64_t bytes = 0;  // > 0 allocation, < 0 free
    uint64_t addr = 0;
    int device = -1;                                        // "Device Id": -1 host memory
    ProfilerCategory category = ProfilerCategory::unknown;  // inferred (a free: its allocation's, unknown if before)
    bool allocated_in_trace = true;                         // a free: whether its allocation is in the trace
    uint32_t op = 0;  // KinetoMemoryEvents::op_names index of the innermost enclosing op (0: none)
};

struct KinetoMemoryEvents {
    std::string path;
    int64_t base_time_ns = 0;               // baseTimeNanoseconds (the profiler's clock = ts + this); 0 when absent
    std::vector<KinetoMemoryEvent> events;  // in time order
    std::vector<std::string> op_names = {"(no enclosing op)"};
    int rank = -1;  // distributedInfo.rank, else -1

    // The memory profiler's clock in microseconds for an event (what its timeline export's times use).
    int64_t profiler_time_us(const KinetoMemoryEvent& e) const { return add_saturated(e.t_ns, base_time_ns) / 1000; }
};

// The inferred categories over time of one device, in the memory profiler's form (memory_timeline.h): a row per
// microsecond with events, the bytes allocated since profiling began by inferred category (frees of what was
// allocated before the trace are left out: their category and size before it are unknown). `rank` and `source`
// from the trace.
MemoryTimeline inferred_timeline(const KinetoMemoryEvents& events, int device);
// The device whose allocations in the trace add up to the most bytes; nullopt when it has none.
std::optional<int> busiest_device(const KinetoMemoryEvents& events);

// The category the names of the enclosing ops (innermost first) suggest; unknown when no rule matches.
ProfilerCategory infer_category_from_ops(const std::vector<std::string_view>& enclosing_innermost_first);

// A parsed Kineto trace's [memory] events (kept by the reader's one pass, kineto_parse.h) with the categories the
// ops around them suggest; `rank` is the rank the file holds. Empty events when the trace has none.
struct KinetoFile;
KinetoMemoryEvents memory_events_of(const KinetoFile& file, int rank);

}  // namespace us::prof
