// What a configuration costs, computed without running anything: parameters, bytes per memory category per rank,
// FLOPs per token, communication per step per process group, and the pipeline bubble (docs/formulas.md). Two
// kinds of figure: *predicted* is the engine's exact walk (its per-layer activation breakdown, the collectives it
// issues), re-derived here and checked against the engine by tests, so the two cannot drift apart silently;
// *formula* is the textbook figure (the Ultra-Scale Playbook, Korthikanti et al.) for the same configuration, shown
// beside it.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/core/memory_category.h"
#include "common/core/recompute.h"
#include "common/settings/parallel_layout.h"
#include "profiler/event.h"

namespace us {
struct TrainConfig;
}

namespace us::predict {

struct PredictInput {
    // model
    int64_t vocab = 256, hidden = 256, layers = 4, heads = 4, seq = 128;
    // mixture of experts: every moe_every-th block has E experts, K per token (0 experts: dense)
    int64_t moe_experts = 0, moe_topk = 2, moe_every = 1;
    double moe_capacity_factor = 0;  // 0: dropless
    // Under expert parallelism, per model layer: the rows this rank's experts receive over the uniform share
    // (routing as measured: its experts' share of the choices x ep). Empty, or 1 for a layer: uniform routing.
    std::vector<double> moe_expert_load;
    // The same, each layer at its own most loaded step: one block's backward temporaries peak at that block's most.
    std::vector<double> moe_expert_load_most;
    // training
    int64_t micro_batch = 8;  // B
    int64_t grad_accum = 1;   // m
    bool bf16 = false;
    bool fp32_grad_accum = false;
    Recompute recompute = Recompute::none;
    bool flash = false;  // --attention flash: blockwise attention, the log-sum-exp instead of probs
    bool cuda = false;   // --device cuda: where the backend's fused kernels change what is allocated
    ParallelLayout parallel;
    int stage = 0;  // the pipeline stage of the rank the memory is predicted for

    // A view of a run's settings: each field is the setting of the same name (common/settings/settings_schema.h).
    static PredictInput from_settings(const TrainConfig& cfg);
    // From a run's config JSON (ultrascope-train's TrainConfig::to_json), e.g. the trace metadata, read through the
    // settings table: a missing key is the table's default.
    static PredictInput from_config(const nlohmann::json& config);
};

// One kind of collective the engine issues, per step on a rank: its op, its buffer (the whole for all-gather and
// reduce-scatter) and how many times it runs.
struct PredictedCollective {
    std::string what;
    prof::OpClass op = prof::OpClass::all_reduce;
    int64_t bytes = 0;
    int64_t count = 0;
};

struct Prediction {
    int64_t params = 0;                 // N = h*v + L*(12h^2 + 13h) + 2h (with experts: docs/formulas.md)
    int64_t active_params = 0;          // those a token uses: K of the E experts of an MoE block (= params if dense)
    int64_t params_on_rank = 0;         // this rank's: its stage's layers, its tp shard of them, the embedding's
                                        // vocabulary rows on the first and last stage (the last stage's tied copy),
                                        // its E/ep experts of each MoE block
    int64_t expert_params_on_rank = 0;  // of which experts
    // Bytes per category on the rank; nullopt where the formulas do not model a category (op workspace).
    std::array<std::optional<int64_t>, kMemCategoryCount> memory{};
    // The textbook's figure for the same categories (docs/formulas.md): model states by the ZeRO paper's bytes per
    // parameter over the rank's parameters and dp x cp, activations by Korthikanti et al. per layer x the stage's
    // layers x the micro-batches in flight; nullopt where the textbook has no formula (temporaries, buffers,
    // workspace; activations of MoE blocks).
    std::array<std::optional<int64_t>, kMemCategoryCount> memory_formula{};
    int64_t activations_per_layer = 0;      // bytes per block per micro-batch (docs/memory.md)
    int64_t activations_per_moe_layer = 0;  // the same for an MoE block, its expert rows as if routing were uniform
                                            // (exact when dropless without ep: every choice stays on the rank)
    int64_t moe_rows_per_layer = 0;         // expert rows per MoE block per micro-batch on the rank (uniform routing)
    int64_t activations_per_layer_formula = 0;  // the textbook's (Korthikanti et al.: bf16 with dropout masks,
                                                // doubled for fp32 runs) for the same tp, sp and recompute
    std::string activations_formula;            // which one, as text
    int micro_batches_in_flight = 1;            // on this stage at the activation peak
    double flops_per_token = 0;                 // 6N + 12*L*h*s (training: forward and backward); N active for MoE
    int64_t tokens_per_step = 0;
    // Communication per rank per step: bytes the rank sends, by process group (GroupKind order), for ring
    // algorithms (an all-reduce of K bytes sends 2K(n-1)/n, an all-gather or reduce-scatter of a whole of K bytes
    // K(n-1)/n; pipeline sends what they carry). Each is the engine's exact walk (every collective it issues, ZeRO-3's
    // gathers bucket by bucket); ep's all-to-alls assume uniform routing; world is the gradient norm's scalar.
    std::array<int64_t, prof::kGroupCount> comm_bytes{};
    int64_t dp_comm_bytes = 0;                        // comm_bytes of dp
    int64_t pp_comm_bytes = 0;                        // comm_bytes of pp
    int64_t tp_comm_bytes_formula = 0;                // the textbook: 4 all-reduces of s*b*h per block per micro-batch
    std::vector<PredictedCollective> tp_collectives;  // what makes up comm_bytes of tp
    std::vector<PredictedCollective> cp_collectives;  // and of cp (the ring's sends, or the all-gather's collectives)
    std::vector<PredictedCollective> ep_collectives;  // and of ep (all-to-alls; bytes are what goes to others)
    int64_t ep_comm_bytes_formula = 0;  // 4 all-to-alls of K b s h (ep - 1)/ep per MoE block per micro-batch
    double bubble_theory = 0;           // (pp - 1) / m, (pp - 1) / (v m) interleaved, about a third of 1F1B for ZB-H1
    std::string bubble_formula;
    double bubble_simulated = 0;  // this stage's bubble when the schedule runs on an idealised machine

    int64_t memory_total() const;  // sum of the modelled categories' peaks (not the peak of their sum)
    std::array<bool, kMemCategoryCount> modelled_categories() const;  // those with a figure in `memory`
    int64_t memory_formula_total() const;                             // sum of the textbook's categories
};

Prediction predict(const PredictInput& in);

// The rows of `ultrascope predict`, as text.
std::string format_prediction(const PredictInput& in, const Prediction& p);
nlohmann::json prediction_json(const PredictInput& in, const Prediction& p);

}  // namespace us::predict
