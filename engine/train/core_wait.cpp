// The thread's run-queue delay (core_wait.h).
#include "engine/train/core_wait.h"

#include <cstdio>

namespace us {

double thread_runqueue_wait_ms() {
    std::FILE* f = std::fopen("/proc/thread-self/schedstat", "r");
    if (!f) return -1;
    unsigned long long on_cpu_ns = 0, waiting_ns = 0;
    const int read = std::fscanf(f, "%llu %llu", &on_cpu_ns, &waiting_ns);
    std::fclose(f);
    return read == 2 ? double(waiting_ns) / 1e6 : -1;
}

}  // namespace us
