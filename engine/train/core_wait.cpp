// The threads' times on a core and waiting for one (core_wait.h).
#include "engine/train/core_wait.h"

#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace us {

namespace {

// A schedstat file's first two fields: nanoseconds on a CPU and waiting on a run queue; false where unreadable. Read
// into a stack buffer: it runs for every worker at every step's end.
bool read_schedstat(const char* path, uint64_t& on_cpu_ns, uint64_t& waiting_ns) {
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char text[96];
    const ssize_t n = ::read(fd, text, sizeof text - 1);
    ::close(fd);
    if (n <= 0) return false;
    text[n] = '\0';
    char* end = nullptr;
    on_cpu_ns = std::strtoull(text, &end, 10);
    if (end == text) return false;
    char* after = nullptr;
    waiting_ns = std::strtoull(end, &after, 10);
    return after != end;
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
    for (Watched& w : m_threads) {
        char path[64];
        std::snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", w.tid);
        uint64_t on_cpu_ns = 0, waiting_ns = 0;
        if (!read_schedstat(path, on_cpu_ns, waiting_ns)) {  // it ended, or no schedstat
            w.seen = false;
            continue;
        }
        if (w.seen) {
            if (on_cpu_ns >= w.on_cpu_ns) m_on_cpu_ns += on_cpu_ns - w.on_cpu_ns;
            if (waiting_ns >= w.waiting_ns) m_waiting_ns += waiting_ns - w.waiting_ns;
        }
        w.seen = m_ever_read = true, w.on_cpu_ns = on_cpu_ns, w.waiting_ns = waiting_ns;
    }
    if (!m_ever_read) return {};
    return {double(m_on_cpu_ns) / 1e6, double(m_waiting_ns) / 1e6};
}

}  // namespace us
