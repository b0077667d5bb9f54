// A rank's wait for a core, per step and over its steady steps (core_wait.h).
#include "profiler/analysis/core_wait.h"

#include <algorithm>
#include <map>
#include <string>

namespace us::prof {

namespace {

// Each step's rise of one cumulative counter (milliseconds) into `field`, in seconds.
void add_rises(const TraceStore& store, const RankTrace& rt, std::string_view counter,
               std::vector<StepBreakdown>& steps, double StepBreakdown::*field) {
    for (StepBreakdown& b : steps) b.*field = -1;
    const auto it = rt.counters.find(store.find_name(std::string(counter)));
    if (it == rt.counters.end()) return;
    std::map<int, double> at_end;  // step -> the counter at its end (the last point recorded in it)
    for (const CounterPoint& p : it->second) at_end[p.step] = p.value;
    for (StepBreakdown& b : steps) {
        const auto before = at_end.find(b.step - 1), end = at_end.find(b.step);
        if (before != at_end.end() && end != at_end.end()) b.*field = std::max(0.0, end->second - before->second) / 1e3;
    }
}

}  // namespace

void add_core_waits(const TraceStore& store, const RankTrace& rt, std::vector<StepBreakdown>& steps) {
    add_rises(store, rt, kRunQueueWaitCounter, steps, &StepBreakdown::core_wait_s);
    add_rises(store, rt, kWorkerRunQueueWaitCounter, steps, &StepBreakdown::worker_core_wait_s);
    add_rises(store, rt, kThreadCpuCounter, steps, &StepBreakdown::core_cpu_s);
    add_rises(store, rt, kWorkerCpuCounter, steps, &StepBreakdown::worker_cpu_s);
}

}  // namespace us::prof
