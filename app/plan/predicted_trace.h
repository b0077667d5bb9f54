// A layout's step as the planner predicts it, written as a trace, so the views that show a measured run (timeline,
// overlap, pipeline schedule, memory anatomy) and `ultrascope report` show the prediction the same way.
//
// One representative rank per pipeline stage (the one with tp, cp, dp and ep index 0: the others of a stage do the
// same work at the same time). Spans sit where the step model (step_time.h) puts them: the simulated schedule's
// actions, each micro-batch's layers op by op (GEMMs at their size's efficiency, the attention core, the
// memory-bound ops), the tensor-, context- and expert-parallel collectives on the comm lane where they wait or hide,
// pipeline transfers on the p2p lane, the data-parallel reduction behind the last backward and what stays exposed,
// the optimizer. Memory follows the planner's per-stage estimate: the model states for the whole step, activations
// taken layer by layer in forward and given back in backward (their peak is the estimate's, at the moment the
// schedule holds the most micro-batches), one backward's temporaries. Every rank's metadata carries "predicted", so
// every figure read from it says it is the model's, not a measurement.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "app/plan/planner.h"
#include "profiler/transport/chunk.h"

namespace us::prof {
class TraceStore;
}

namespace us::plan {

struct PredictedTraceOptions {
    int steps = 3;  // identical steps (the analysis leaves the first out as warm-up, as for a run)
    // Above this many (micro-batch, layer) pairs per rank and step, each action is drawn as one op per kind
    // (GEMMs, attention, other) instead of layer by layer, so that 16,384-GPU layouts stay light.
    int64_t max_detailed_layer_passes = 4096;
};

// Chunks per representative rank: metadata, events, end. `title` names the plan ("llama3-70b on 1024 h100-sxm").
std::vector<prof::Chunk> predicted_trace(const predict::ModelDesc& model, const predict::ClusterDesc& cluster,
                                         const predict::PlanResult& plan, int64_t gpus,
                                         const PredictedTraceOptions& options = {});

// The same, in a store ready to read (the GUI), or written as a trace file (`ultrascope plan --trace-out`).
std::unique_ptr<prof::TraceStore> predicted_store(const predict::ModelDesc& model, const predict::ClusterDesc& cluster,
                                                  const predict::PlanResult& plan, int64_t gpus,
                                                  const PredictedTraceOptions& options = {});
void write_predicted_trace(const std::string& path, const predict::ModelDesc& model,
                           const predict::ClusterDesc& cluster, const predict::PlanResult& plan, int64_t gpus,
                           const PredictedTraceOptions& options = {});

}  // namespace us::plan
