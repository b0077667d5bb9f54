// What FORMULAS.md predicts for a configuration, computed without running anything: parameters, bytes per memory
// category per rank, FLOPs per token, communication volume per step, and the pipeline bubble. The activation
// prediction is the engine's own per-layer breakdown (docs/memory.md), re-derived here from the formula and
// checked against the engine's table by a test, so the two can never drift apart silently.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "engine/core/memory_category.h"

namespace us::prof {

struct PredictInput {
    // model
    int64_t vocab = 256, hidden = 256, layers = 4, heads = 4, seq = 128;
    // training
    int64_t micro_batch = 8;  // B
    int64_t grad_accum = 1;   // m
    bool bf16 = false;
    bool fp32_grad_accum = false;
    std::string recompute = "none";  // none | selective | full
    // parallel
    int dp = 1, pp = 1, tp = 1, cp = 1, ep = 1;
    int zero = 0;
    std::string pp_schedule = "1f1b";
    int pp_chunks = 1;
    double bucket_mb = 1.0;
    int stage = 0;  // the pipeline stage of the rank the memory is predicted for

    // From a run's config JSON (ultrascope-train's TrainConfig::to_json), e.g. the trace metadata.
    static PredictInput from_config(const nlohmann::json& config);
};

struct Prediction {
    int64_t params = 0;             // N = h*v + L*(12h^2 + 13h) + 2h
    int64_t params_on_rank = 0;     // this stage's parameters (the last stage adds its copy of the embedding)
    // Bytes per category on the rank; nullopt where the formulas do not model a category (op workspace).
    std::array<std::optional<int64_t>, kMemCategoryCount> memory{};
    int64_t activations_per_layer = 0;   // bytes per block per micro-batch (docs/memory.md)
    int micro_batches_in_flight = 1;     // on this stage at the activation peak
    double flops_per_token = 0;          // 6N + 12*L*h*s (training: forward and backward)
    int64_t tokens_per_step = 0;
    // Communication per rank per step, bytes (ring algorithms).
    int64_t dp_comm_bytes = 0;   // gradients (all-reduce, or reduce-scatter + all-gather under ZeRO)
    int64_t pp_comm_bytes = 0;   // activations and their gradients between stages
    double bubble_theory = 0;    // (pp - 1) / m, (pp - 1) / (v m) interleaved, about a third of 1F1B for ZB-H1
    std::string bubble_formula;
    double bubble_simulated = 0;  // this stage's bubble when the schedule runs on an idealised machine

    int64_t memory_total() const;
};

Prediction predict(const PredictInput& in);

// The rows of `ultrascope predict`, as text.
std::string format_prediction(const PredictInput& in, const Prediction& p);
nlohmann::json prediction_json(const PredictInput& in, const Prediction& p);

}  // namespace us::prof
