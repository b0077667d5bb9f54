// A rank's work per step and its micro-batch annotations, from its spans (stage_work.h).
#include "profiler/analysis/stage_work.h"

#include <algorithm>
#include <map>
#include <set>

#include "profiler/analysis/intervals.h"

namespace us::prof {

namespace {

bool is_p2p(const Span& s) { return s.kind == SpanKind::comm && (s.op == OpClass::send || s.op == OpClass::recv); }

// A micro-batch annotation's index: torch.distributed.pipelining's "Forward 3" (GPipe) or "PP:2F3" (stage 2,
// micro-batch 3: the interleaved schedules); -1 for any other name.
int forward_micro_batch(const std::string& n) {
    size_t at;
    if (n.rfind("Forward ", 0) == 0)
        at = 8;
    else if (n.rfind("PP:", 0) == 0 && (at = n.find('F', 3)) != std::string::npos)
        ++at;
    else
        return -1;
    if (at >= n.size()) return -1;
    int v = 0;
    for (size_t i = at; i < n.size(); ++i) {
        if (n[i] < '0' || n[i] > '9') return -1;
        v = v * 10 + (n[i] - '0');
    }
    return v;
}

}  // namespace

std::vector<WorkWindow> work_windows(const RankTrace& rt) {
    const bool device = rt.has_device_spans();
    std::vector<Interval> work;
    for (Lane lane : device ? std::vector<Lane>{Lane::device, Lane::device_comm} : std::vector<Lane>{Lane::compute})
        for (const Span& s : rt.lanes[size_t(lane)].spans())
            if ((device && !is_p2p(s)) || (!device && s.kind == SpanKind::op)) work.emplace_back(s.begin, s.end);
    const auto merged = union_of(work, INT64_MIN, INT64_MAX);
    std::vector<WorkWindow> out;
    for (const Span& step : rt.lanes[size_t(Lane::host)].spans()) {
        if (step.kind != SpanKind::step) continue;
        const auto in_step = clip(merged, step.begin, step.end);
        if (in_step.empty()) continue;
        out.push_back({step.step, in_step.back().second - in_step.front().first, total_length(in_step)});
    }
    return out;
}

int annotated_micro_batches(const TraceStore& store, const RankTrace& rt) {
    std::map<int, std::set<int>> per_step;
    for (const Span& s : rt.lanes[size_t(Lane::host)].spans())
        if (s.kind == SpanKind::op)
            if (const int mb = forward_micro_batch(store.name(s.name)); mb >= 0) per_step[s.step].insert(mb);
    int most = 0;
    for (const auto& [step, mbs] : per_step) most = std::max(most, int(mbs.size()));
    return most;
}

}  // namespace us::prof
