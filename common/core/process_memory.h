// What the process really holds, beside what the tracked allocator counts: the resident set (pages of the process
// in RAM, from /proc/self/statm) and the heap in use (malloc's, from mallinfo2). The difference between the
// resident set and the tracked total is memory no category accounts for: the runtime, libraries (BLAS buffers,
// MPI's and NCCL's), thread stacks, the allocator's fragmentation.
#pragma once

#include <cstdint>

namespace us {

struct ProcessMemory {
    int64_t resident_bytes = -1;  // -1: not available on this system
    int64_t heap_bytes = -1;      // malloc'd and not freed (small blocks and mmap'd large ones)
};

ProcessMemory read_process_memory();

}  // namespace us
