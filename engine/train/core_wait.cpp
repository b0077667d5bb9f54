// The threads' times on a core and waiting for one (core_wait.h).
#include "engine/train/core_wait.h"

#include <omp.h>
#include <unistd.h>

#include <cstdio>

namespace us {

namespace {

// A schedstat file's first two fields: nanoseconds on a CPU and waiting on a run queue; false where unreadable.
bool read_schedstat(const char* path, uint64_t& on_cpu_ns, uint64_t& waiting_ns) {
    std::FILE* f = std::fopen(path, "r");
    if (!f) return false;
    unsigned long long on_cpu = 0, waiting = 0;
    const int read = std::fscanf(f, "%llu %llu", &on_cpu, &waiting);
    std::fclose(f);
    on_cpu_ns = on_cpu, waiting_ns = waiting;
    return read == 2;
}

}  // namespace

ThreadTimes this_thread_times() {
    uint64_t on_cpu_ns = 0, waiting_ns = 0;
    if (!read_schedstat("/proc/thread-self/schedstat", on_cpu_ns, waiting_ns)) return {};
    return {double(on_cpu_ns) / 1e6, double(waiting_ns) / 1e6};
}

std::vector<int> openmp_worker_tids() {
    std::vector<int> tids(size_t(omp_get_max_threads()), 0);
#pragma omp parallel
    tids[size_t(omp_get_thread_num())] = int(::gettid());
    const int self = int(::gettid());
    std::vector<int> workers;
    for (int tid : tids)
        if (tid > 0 && tid != self) workers.push_back(tid);
    return workers;
}

ThreadTimes WorkerThreadsTimes::totals() {
    if (this_thread_times().waiting_ms < 0) return {};  // the kernel keeps no schedstat
    for (int tid : m_tids) {
        char path[64];
        std::snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", tid);
        Seen now;
        const auto last = m_last.find(tid);
        if (!read_schedstat(path, now.on_cpu_ns, now.waiting_ns)) {  // it ended
            if (last != m_last.end()) m_last.erase(last);
            continue;
        }
        if (last != m_last.end()) {
            if (now.on_cpu_ns >= last->second.on_cpu_ns) m_on_cpu_ns += now.on_cpu_ns - last->second.on_cpu_ns;
            if (now.waiting_ns >= last->second.waiting_ns) m_waiting_ns += now.waiting_ns - last->second.waiting_ns;
        }
        m_last[tid] = now;  // the map's nodes are made at the first call only
    }
    return {double(m_on_cpu_ns) / 1e6, double(m_waiting_ns) / 1e6};
}

}  // namespace us
