// The time a rank's trainer thread was ready to run but waited for a core: what the machine's other load took from
// the rank, measured by the kernel (the trainer's runqueue_wait_ms counter, profiler/event.h and
// engine/train/core_wait.h, recorded at each step's end). Per step it is the counter's rise since the step before;
// the report gives each rank's over its steady steps, the Ranks view per step, blame the straggler's against its
// group's, and it can explain a pipeline bubble above its figure (misses.cpp). The rank's OpenMP workers (BLAS runs
// on the same pool) have their own counters, their waits and times on a core summed (worker_runqueue_wait_ms,
// worker_cpu_ms): thread-seconds, at most the time their waits cost the rank, which blame reads as such. The times
// on a core (thread_cpu_ms, worker_cpu_ms) weigh the waits: more work waits longer on shared cores.
#pragma once

#include <vector>

#include "profiler/analysis/step_breakdown.h"
#include "profiler/trace/trace_store.h"

namespace us::prof {

// Sets each step's core_wait_s, worker_core_wait_s, core_cpu_s and worker_cpu_s where their counters were recorded
// at its end and at the end of the step before it (the first recorded step stays unknown: -1).
void add_core_waits(const TraceStore& store, const RankTrace& rt, std::vector<StepBreakdown>& steps);

// A rank's threads per steady step (seconds; -1 unknown): the trainer's wait for a core and time on one, and the
// same of its OpenMP workers, summed over them.
struct CoreTimes {
    double trainer_wait_s = -1, trainer_cpu_s = -1, workers_wait_s = -1, workers_cpu_s = -1;
};

// The share of the time ready to run spent waiting for a core, wait / (wait + time on a core); 0 for threads never
// ready (idle); -1 unknown. A rank with more work waits longer at the same share (docs/blame.md).
inline double waiting_share(double wait_s, double cpu_s) {
    if (wait_s < 0 || cpu_s < 0) return -1;
    return wait_s + cpu_s > 0 ? wait_s / (wait_s + cpu_s) : 0;
}

// What `cpu_s` on a core waits for one at `share` of the time ready to run spent waiting (share < 1): the wait a
// thread's own work accounts for where the cores are shared that much; blame's and the diff's excess is the wait
// beyond it.
inline double wait_at_share_s(double cpu_s, double share) { return share / (1 - share) * cpu_s; }

// Seconds of one of those fields over the given steps (StepBreakdown or DigestStep); -1 where there are none or one
// of them is unknown (an imported run, a trace from before the counter, a kernel without schedstat).
template <typename Step>
double sum_over_steps_s(const std::vector<Step>& steps, double Step::*field) {
    if (steps.empty()) return -1;
    double total = 0;
    for (const Step& s : steps) {
        if (s.*field < 0) return -1;
        total += s.*field;
    }
    return total;
}

// The trainer thread's wait for a core over the steps.
template <typename Step = StepBreakdown>  // the default: a braced list of steps
double runqueue_wait_s(const std::vector<Step>& steps) {
    return sum_over_steps_s(steps, &Step::core_wait_s);
}

}  // namespace us::prof
