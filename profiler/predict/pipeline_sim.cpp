#include "profiler/predict/pipeline_sim.h"

#include <algorithm>

#include "common/core/check.h"

namespace us::predict {

PipelineTiming simulate_pipeline(const Schedule& schedule, const PipelineShape& shape,
                                 const std::vector<VirtualStageCost>& costs, double transfer_s, bool timed_actions) {
    const int pp = shape.pp, S = pp * shape.chunks;
    US_CHECK_INPUT(int(costs.size()) == S, "pipeline simulation: {} stage costs for {} virtual stages", costs.size(),
                   S);
    // When each (kind, virtual stage, micro-batch) finished: 0 forward, 1 backward (or its input part), 2 weight.
    // A flat table (a search simulates thousands of schedules of up to pp x m x V x 3 actions), with a flag for
    // "not yet".
    const int M = std::max(1, shape.micro_batches);
    std::vector<double> done_at(size_t(3) * size_t(S) * size_t(M), 0.0);
    std::vector<char> done(done_at.size(), 0);
    const auto slot = [&](int kind, int v, int mb) {
        US_CHECK_INPUT(mb >= 0 && mb < M, "pipeline simulation: micro-batch {} of {}", mb, M);
        return (size_t(kind) * size_t(S) + size_t(v)) * size_t(M) + size_t(mb);
    };
    PipelineTiming t;
    t.finish.assign(size_t(pp), 0.0);
    t.busy.assign(size_t(pp), 0.0);
    std::vector<size_t> next(size_t(pp), 0);
    size_t left = 0;
    for (const auto& actions : schedule) left += actions.size();
    if (timed_actions) t.actions.reserve(left);
    while (left > 0) {
        bool progressed = false;
        for (int st = 0; st < pp; ++st)
            while (next[size_t(st)] < schedule[size_t(st)].size()) {
                const PipeAction& a = schedule[size_t(st)][next[size_t(st)]];
                const int vs = a.chunk * pp + st;
                const VirtualStageCost& c = costs[size_t(vs)];
                double ready = 0;
                bool ok = true;
                // A dependency on another virtual stage arrives a transfer later (always another rank when pp > 1).
                auto need = [&](int kind, int v, int mb, bool remote) {
                    const size_t k = slot(kind, v, mb);
                    if (!done[k])
                        ok = false;
                    else
                        ready = std::max(ready, done_at[k] + (remote ? transfer_s : 0.0));
                };
                double cost = 0;
                int kind = 1;
                if (a.op == PipeOp::forward) {
                    if (vs > 0) need(0, vs - 1, a.micro_batch, true);
                    cost = c.forward, kind = 0;
                } else if (a.op == PipeOp::backward_weight) {
                    need(1, vs, a.micro_batch, false);
                    cost = c.weight, kind = 2;
                } else {
                    need(0, vs, a.micro_batch, false);
                    if (vs < S - 1) need(1, vs + 1, a.micro_batch, true);
                    cost = a.op == PipeOp::backward_input ? c.backward - c.weight : c.backward;
                }
                if (!ok) break;
                const double start = std::max(ready, t.finish[size_t(st)]);
                t.finish[size_t(st)] = start + cost;
                t.busy[size_t(st)] += cost;
                const size_t k = slot(kind, vs, a.micro_batch);
                done[k] = 1, done_at[k] = start + cost;
                if (timed_actions) t.actions.push_back({st, a, start, start + cost});
                ++next[size_t(st)];
                --left;
                progressed = true;
            }
        US_CHECK_INPUT(progressed,
                       "the pipeline schedule deadlocks: a stage waits for an action no stage can run first");
    }
    t.makespan = *std::max_element(t.finish.begin(), t.finish.end());
    return t;
}

}  // namespace us::predict
