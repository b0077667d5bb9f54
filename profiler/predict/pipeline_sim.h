// The pipeline simulated with each virtual stage's own costs: the schedule the engine runs (make_schedule), each
// action taking the forward, backward (or, split, input- and weight-gradient) time of its own slice of the model,
// and each hand-over between ranks taking a transfer time. The engine's simulate_schedule charges every stage the
// same unit costs (it draws the theory); a stage holding the embedding or the output head really is slower, and the
// others wait for it only where the schedule makes them (docs/planner.md, "Pipeline").
#pragma once

#include <vector>

#include "common/schedule/pipeline_schedule.h"

namespace us::predict {

// One micro-batch on one virtual stage (chunk c of rank s is virtual stage c * pp + s).
struct VirtualStageCost {
    double forward = 0;
    double backward = 0;  // the whole backward (input and weight gradients)
    double weight = 0;    // of it, the weight-gradient part a split schedule (zb1) runs as its own W action
};

// One action as simulated: what the predicted timeline draws (app/plan/predicted_trace.h).
struct TimedAction {
    int rank = 0;
    PipeAction action{};
    double begin = 0, end = 0;
};

struct PipelineTiming {
    double makespan = 0;
    std::vector<double> finish;        // per rank: when its last action ends
    std::vector<double> busy;          // per rank: time in actions
    std::vector<TimedAction> actions;  // every action, in the order the simulation placed them
};

// costs[vs] for vs in 0 .. pp * chunks - 1; transfer_s: one activation (or its gradient) between two ranks.
// timed_actions false: `actions` left empty (a search reads the finish times only). UserError when the schedule
// deadlocks (as simulate_schedule).
PipelineTiming simulate_pipeline(const Schedule& schedule, const PipelineShape& shape,
                                 const std::vector<VirtualStageCost>& costs, double transfer_s,
                                 bool timed_actions = true);

}  // namespace us::predict
