// How long a rank's threads have run on a core and been ready to run but waiting for one: the kernel's schedstat
// (/proc/.../schedstat: time on a CPU, time on a run queue). The trainer records cumulative counters at each step's
// end (profiler/event.h): its own thread's wait and time on a core (runqueue_wait_ms, thread_cpu_ms) and, where the
// rank computes on more than one thread, its OpenMP workers' summed (worker_runqueue_wait_ms, worker_cpu_ms: BLAS
// runs on the same pool), so that the report can tell time the machine's other load took from time the rank's own
// work or a neighbour did (blame, a pipeline bubble's misses: docs/blame.md, docs/report-schema.md). The time on a
// core matters: a rank with more work is ready to run longer and, where the cores are shared, waits longer for the
// same share of them. Other threads (the communication progress thread, the profiler's writer) are not counted: they
// wake often and wait for the rank's own busy cores, which says nothing of the machine's other load.
#pragma once

#include <cstdint>
#include <vector>

namespace us {

// A thread's time since it started, in milliseconds; -1 where the kernel does not say (no schedstat, not Linux).
struct ThreadTimes {
    double on_cpu_ms = -1, waiting_ms = -1;
};
ThreadTimes this_thread_times();
inline double thread_runqueue_wait_ms() { return this_thread_times().waiting_ms; }

// The thread ids of the calling thread's OpenMP team other than itself (its pool's workers; empty with one thread).
std::vector<int> openmp_worker_tids();

// The given threads' times summed: a tally kept across calls, so that a thread that ends adds only what it did
// between calls that both saw it (the sums never drop).
class WorkerThreadsTimes {
public:
    WorkerThreadsTimes() = default;
    explicit WorkerThreadsTimes(const std::vector<int>& tids) {
        for (int tid : tids) m_threads.push_back({tid});
    }
    bool empty() const { return m_threads.empty(); }
    // Milliseconds summed since the first call (which returns zeros); -1 where no watched thread was ever read (no
    // schedstat, or no threads).
    ThreadTimes totals();

private:
    struct Watched {
        int tid = 0;
        bool seen = false;  // read at the last call (false once it ended)
        uint64_t on_cpu_ns = 0, waiting_ns = 0;
    };
    std::vector<Watched> m_threads;
    bool m_ever_read = false;
    uint64_t m_on_cpu_ns = 0, m_waiting_ns = 0;
};

}  // namespace us
