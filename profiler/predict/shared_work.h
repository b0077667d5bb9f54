// What the layouts of one planner search share, worked out once for all of them: the pipeline schedules (by schedule
// and shape), the in-flight counts the memory model reads from them, and the simulated pipelines (by their exact
// inputs: the schedule, the shape, every virtual stage's costs and the transfer time). These simulations were nearly
// all of a search's time, and layouts that differ only in their ZeRO stage simulate the same schedule with the same
// costs. evaluate() with a SharedWork gives the figures it gives without (docs/performance.md, issue 53).
// One per search thread (not thread-safe); forget() between groups of layouts bounds its memory.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "common/schedule/pipeline_schedule.h"
#include "profiler/predict/layout.h"
#include "profiler/predict/model_shapes.h"
#include "profiler/predict/pipeline_sim.h"

namespace us::predict {

class SharedWork {
public:
    // make_schedule(schedule, shape); UserError as it.
    const Schedule& schedule(PipelineSchedule schedule, const PipelineShape& shape);
    // stages_in_flight(layout), keyed on what it reads: pp, the schedule, its chunks and the micro-batches per step.
    const std::vector<StageInFlight>& in_flight(const Layout& layout);
    // simulate_pipeline(schedule(schedule, shape), shape, costs, transfer_s) without its timed actions (the step's
    // pieces read the finish times; the predicted timeline, which draws the actions, simulates its one layout).
    const PipelineTiming& pipeline(PipelineSchedule schedule, const PipelineShape& shape,
                                   const std::vector<VirtualStageCost>& costs, double transfer_s);
    // Drops the schedules and the simulated pipelines (megabytes for long schedules, and a search's next group of
    // layouts, another tp, cp or pp, has other costs); the in-flight counts, a few numbers a shape that other groups
    // meet again, stay.
    void forget();

private:
    using ShapeKey = std::array<int, 4>;  // schedule, pp, micro-batches, chunks
    std::map<ShapeKey, Schedule> m_schedules;
    std::map<ShapeKey, std::vector<StageInFlight>> m_in_flight;
    // the inputs bit for bit: the shape's key, then the transfer time and each virtual stage's three costs
    std::map<std::vector<uint64_t>, PipelineTiming> m_pipelines;
};

}  // namespace us::predict
