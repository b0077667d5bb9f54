// The planner's API: a pure function from (model, cluster, layout) to what that layout needs and how fast it runs,
// and a search over every valid layout of a model on N GPUs. No printing, no files: the command line
// (app/cli/plan.cpp) and a GUI view call the same functions. Every figure says its kind: "predicted" (the engine's
// exact walk), "formula" (the textbook), "model" (the step-time model of docs/planner.md, with its inputs measured
// or assumed per the cluster file), "derived" (tokens/s, MFU).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/plan/cluster_desc.h"
#include "app/plan/layout.h"
#include "app/plan/memory_model.h"
#include "app/plan/model_desc.h"
#include "app/plan/step_time.h"

namespace us::plan {

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

PlanResult evaluate(const ModelDesc& model, const ClusterDesc& cluster, const Layout& layout);

struct SearchOptions {
    int64_t gpus = 8;
    int64_t global_batch_sequences = 0;  // sequences per step (0: dp x micro-batch, one micro-batch each)
    bool bf16 = true;
    bool flash = true;  // blockwise attention (the s^2 probabilities never stored)
    std::vector<int> micro_batches = {1, 2, 4, 8};
    std::vector<Recompute> recompute = {Recompute::none, Recompute::selective, Recompute::full};
    bool allow_tp_across_nodes = false;  // prune tp groups that leave a node (always slower)
    // Evaluate one layout in `sample_stride` of those the search would (in its enumeration order, the first
    // always): a test's way to walk many searches in bounded time. 1: every layout.
    int64_t sample_stride = 1;
};

struct SearchResult {
    std::vector<PlanResult> ranked;   // fitting layouts, fastest first, then those that do not fit
    int64_t considered = 0;           // layouts evaluated
    int64_t sampled_out = 0;          // layouts left out by SearchOptions::sample_stride
    std::vector<std::string> pruned;  // what the search skipped before evaluating, and why (counts)
};

SearchResult search(const ModelDesc& model, const ClusterDesc& cluster, const SearchOptions& options);

nlohmann::json plan_json(const ModelDesc& model, const ClusterDesc& cluster, const PlanResult& r);

}  // namespace us::plan
