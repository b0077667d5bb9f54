#include "common/core/process_memory.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>

namespace us {

ProcessMemory read_process_memory() {
    ProcessMemory m;
    // statm: size resident shared text lib data dt, in pages; one read of a small proc file (a few microseconds).
    if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
        long long size = 0, resident = 0;
        if (std::fscanf(f, "%lld %lld", &size, &resident) == 2)
            m.resident_bytes = int64_t(resident) * sysconf(_SC_PAGESIZE);
        std::fclose(f);
    }
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    const struct mallinfo2 mi = mallinfo2();
    m.heap_bytes = int64_t(mi.uordblks) + int64_t(mi.hblkhd);
#endif
    return m;
}

}  // namespace us
