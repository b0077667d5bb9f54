// One layout evaluated: what it needs (memory per category on the busiest rank) and how fast it runs (the step-time
// model), a pure function of (model, cluster, layout). The planner's search (app/plan/planner.h) ranks many of these;
// `ultrascope plan` with layout flags, the GUI's planner and the predicted traces show one. Every figure says its
// kind: "predicted" (the engine's exact walk), "formula" (the textbook), "model" (the step-time model of
// docs/planner.md, with its inputs measured or assumed per the cluster file), "derived" (tokens/s, MFU).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "profiler/predict/cluster_desc.h"
#include "profiler/predict/layout.h"
#include "profiler/predict/memory_model.h"
#include "profiler/predict/model_desc.h"
#include "profiler/predict/step_time.h"

namespace us::predict {

class SharedWork;

struct PlanResult {
    Layout layout;
    MemoryEstimate memory;  // busiest rank, by category
    bool fits = false;      // memory.total() <= the GPU's memory
    StepPieces time;
    double tokens_per_step = 0;
    double tokens_per_s = 0;  // derived: tokens per step / step time
    double mfu = 0;           // derived: tokens/s x (6N + 12 L (a d) s) / (GPUs x peak)
    double model_flops_per_token = 0;
    std::string verdict;  // why it loses (search) or "fits" / "out of memory: ..."
};

// `shared`: what a search's layouts share (shared_work.h), or none; the figures are the same.
PlanResult evaluate(const ModelDesc& model, const ClusterDesc& cluster, const Layout& layout,
                    SharedWork* shared = nullptr);

nlohmann::json plan_json(const ModelDesc& model, const ClusterDesc& cluster, const PlanResult& r);

}  // namespace us::predict
