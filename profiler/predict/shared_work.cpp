// SharedWork (shared_work.h): the memo tables, each keyed on every input of the function it stands for.
#include "profiler/predict/shared_work.h"

#include <bit>

namespace us::predict {

const Schedule& SharedWork::schedule(PipelineSchedule schedule, const PipelineShape& shape) {
    const ShapeKey key = {int(schedule), shape.pp, shape.micro_batches, shape.chunks};
    auto it = m_schedules.find(key);
    if (it == m_schedules.end()) it = m_schedules.emplace(key, make_schedule(schedule, shape)).first;
    return it->second;
}

const std::vector<StageInFlight>& SharedWork::in_flight(const Layout& l) {
    const ParallelLayout& p = l.parallel;
    const ShapeKey key = {int(p.pp_schedule), p.pp, l.grad_accum, p.virtual_chunks()};
    auto it = m_in_flight.find(key);
    if (it == m_in_flight.end()) it = m_in_flight.emplace(key, stages_in_flight(l)).first;
    return it->second;
}

const PipelineTiming& SharedWork::pipeline(PipelineSchedule schedule, const PipelineShape& shape,
                                           const std::vector<VirtualStageCost>& costs, double transfer_s) {
    // Doubles compared bit for bit: an equal key means the very same inputs, so the very same timing.
    std::vector<uint64_t> key = {uint64_t(schedule), uint64_t(shape.pp), uint64_t(shape.micro_batches),
                                 uint64_t(shape.chunks), std::bit_cast<uint64_t>(transfer_s)};
    key.reserve(key.size() + 3 * costs.size());
    for (const VirtualStageCost& c : costs)
        for (double v : {c.forward, c.backward, c.weight}) key.push_back(std::bit_cast<uint64_t>(v));
    auto it = m_pipelines.find(key);
    if (it == m_pipelines.end()) {
        // without its up to pp x m x V x 3 timed actions, which no figure of the step reads
        it = m_pipelines
                 .emplace(std::move(key), simulate_pipeline(this->schedule(schedule, shape), shape, costs, transfer_s,
                                                            /*timed_actions=*/false))
                 .first;
    }
    return it->second;
}

void SharedWork::forget() {
    m_schedules.clear();
    m_pipelines.clear();
}

}  // namespace us::predict
