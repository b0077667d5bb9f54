// A rank's wait for a core over its steady steps (core_wait.h).
#include "profiler/analysis/core_wait.h"

#include <algorithm>
#include <map>
#include <string>

namespace us::prof {

double runqueue_wait_s(const TraceStore& store, const RankTrace& rt, const std::vector<StepBreakdown>& steady) {
    if (steady.empty()) return -1;
    const auto it = rt.counters.find(store.find_name(std::string(kRunQueueWaitCounter)));
    if (it == rt.counters.end()) return -1;
    std::map<int, double> at_end;  // step -> the counter at its end (the last point recorded in it)
    for (const CounterPoint& p : it->second) at_end[p.step] = p.value;
    const auto before = at_end.find(steady.front().step - 1), last = at_end.find(steady.back().step);
    if (before == at_end.end() || last == at_end.end()) return -1;
    return std::max(0.0, last->second - before->second) / 1e3;
}

}  // namespace us::prof
