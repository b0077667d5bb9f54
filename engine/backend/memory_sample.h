// One sample of what the process holds next to what the tracked allocator counts, recorded as counters while
// profiling (profiler/event.h: tracked_bytes, reserved_bytes (the allocator's live bytes plus the freed blocks
// it keeps for reuse), process_resident_bytes, process_heap_bytes, and on a GPU device_used_bytes). The trainer and the
// pipeline executor take one at every phase boundary and at each step's end; the analysis turns the pairs into the "not
// tracked" band (docs/memory.md).
#pragma once

namespace us {

class Backend;

void record_memory_sample(Backend& backend);

}  // namespace us
