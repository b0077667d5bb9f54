// Memory per GPU of a layout, by the memory view's categories (common/core/memory_category.h), for the busiest rank
// (the pipeline stage with the largest total). This engine's GPT goes through the engine's exact walk
// (profiler/predict/predict.h: "predicted", tested equal to measured runs); other models through the generalised
// formulas of docs/planner.md (Korthikanti et al. 2022 per layer, the ZeRO paper's bytes per parameter: "formula").
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "profiler/predict/cluster_desc.h"
#include "profiler/predict/layout.h"
#include "profiler/predict/model_desc.h"
#include "common/core/memory_category.h"

namespace us::predict {

class SharedWork;

struct MemoryEstimate {
    std::array<int64_t, kMemCategoryCount> bytes{};  // 0 where not modelled
    std::array<bool, kMemCategoryCount> modelled{};  // which categories the figure covers
    int stage = 0;                                   // the busiest pipeline stage
    int micro_batches_in_flight = 1;
    int64_t params_on_rank = 0;
    int64_t reserved_bytes = 0;  // the cluster's runtime reserve (context, libraries, buffers), on top
    std::string kind;            // "predicted" (the engine's walk) or "formula"
    int64_t categories_total() const;
    int64_t total() const { return categories_total() + reserved_bytes; }
};

// With `shared` (a search's, shared_work.h) the schedule's in-flight counts come from there: the same figures.
MemoryEstimate estimate_memory(const ModelDesc& model, const ClusterDesc& cluster, const Layout& layout,
                               SharedWork* shared = nullptr);
// One pipeline stage's (what the predicted timeline draws for each representative rank).
MemoryEstimate estimate_stage_memory(const ModelDesc& model, const ClusterDesc& cluster, const Layout& layout,
                                     int stage);

}  // namespace us::predict
