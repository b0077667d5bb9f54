// The planner's search: every valid layout of a model on N GPUs, each evaluated (profiler/predict/evaluate.h) and
// ranked, fastest fitting first, with why each slower one loses. No printing, no files: the command line
// (app/cli/plan.cpp) and a GUI view call the same function.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/predict/evaluate.h"

namespace us::plan {

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
    // How the layouts are evaluated, the same figures either way (app/plan/evaluate_layouts.h): on `threads` threads
    // (0: one per core), each group of layouts with the same tp, cp and pp sharing its schedules and pipeline
    // simulations (predict::SharedWork) unless share_work is false. `ultrascope plan --search-threads N
    // --search-no-sharing` (hidden flags) set them for tests/bench/bench_planner.py --search.
    int threads = 0;
    bool share_work = true;
};

struct SearchResult {
    std::vector<predict::PlanResult> ranked;  // fitting layouts, fastest first, then those that do not fit
    int64_t considered = 0;                   // layouts evaluated
    int64_t sampled_out = 0;                  // layouts left out by SearchOptions::sample_stride
    std::vector<std::string> pruned;          // what the search skipped before evaluating, and why (counts)
};

SearchResult search(const predict::ModelDesc& model, const predict::ClusterDesc& cluster, const SearchOptions& options);

// What a question takes where it does not say its precision and attention, for `ultrascope plan` and the Planner
// view alike: the cluster's default precision; flash attention on a datasheet GPU cluster (what training at scale
// runs), the engine's default attention on a calibrated machine (where its measured runs are).
SearchOptions default_search_options(const predict::ClusterDesc& cluster);

}  // namespace us::plan
