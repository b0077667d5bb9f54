// A rank's wait for a core, per step and over its steady steps (core_wait.h).
#include "profiler/analysis/core_wait.h"

#include <algorithm>
#include <map>
#include <string>

namespace us::prof {

void add_core_waits(const TraceStore& store, const RankTrace& rt, std::vector<StepBreakdown>& steps) {
    for (StepBreakdown& b : steps) b.core_wait_s = -1;
    const auto it = rt.counters.find(store.find_name(std::string(kRunQueueWaitCounter)));
    if (it == rt.counters.end()) return;
    std::map<int, double> at_end;  // step -> the counter at its end (the last point recorded in it)
    for (const CounterPoint& p : it->second) at_end[p.step] = p.value;
    for (StepBreakdown& b : steps) {
        const auto before = at_end.find(b.step - 1), end = at_end.find(b.step);
        if (before != at_end.end() && end != at_end.end())
            b.core_wait_s = std::max(0.0, end->second - before->second) / 1e3;
    }
}

}  // namespace us::prof
