// The metadata of a predicted rank (predicted_trace.h): the grid, the device and its peak, and under "predicted" what
// was predicted (model, cluster, layout, step time, shape), so every figure read from the trace says it is the
// model's; for this engine's models also the ultrascope-train config, from which the report predicts memory as for
// a run.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "app/plan/planner.h"
#include "profiler/transport/rank_metadata.h"

namespace us::plan {

prof::RankMetadata predicted_rank_metadata(const predict::ModelDesc& m, const predict::ClusterDesc& c,
                                           const predict::PlanResult& plan, int64_t gpus, const predict::StepModel& sm,
                                           int stage, const std::string& memory_kind, bool detailed);

}  // namespace us::plan
