// What one rank of a layout holds and computes per micro-batch: token rows, widths after the tensor-parallel split,
// parameters on the rank, saved activations per layer (the generalised Korthikanti formula), and the inventory of
// work (GEMM shapes, attention FLOPs, elements of the memory-bound ops) that the step-time model prices and that
// `ultrascope calibrate` divides measured time by. One place, so calibration and prediction count the same units.
#pragma once

#include <cstdint>
#include <vector>

#include "profiler/predict/layout.h"
#include "profiler/predict/model_desc.h"

namespace us::predict {

struct RankShapes {
    int stage = 0;
    bool first = true, last = true;
    int chunks = 1;      // virtual stages per rank
    int64_t layers = 0;  // on the rank (all its chunks)
    int64_t dense_layers = 0, moe_layers = 0;
    int64_t T = 0;                           // token rows of a micro-batch on the rank: b s / cp
    int64_t R = 0;                           // rows of the residual stream: T / tp under sequence parallelism
    int64_t Vr = 0;                          // vocabulary rows on the rank: ceil(v / tp)
    int64_t qkv_width = 0;                   // (a d + 2 kv d) / tp
    int64_t attn_width = 0;                  // a d / tp
    int64_t ffn_width = 0;                   // F / tp
    int64_t heads = 0;                       // a / tp
    int64_t expert_rows = 0;                 // X: rows the rank's experts process per MoE layer (uniform routing)
    int64_t params = 0;                      // on the rank, experts aside (before ZeRO)
    int64_t expert_params = 0;               // the rank's experts
    int64_t layer_activation_bytes = 0;      // saved per dense layer per micro-batch, with the layout's recompute
    int64_t moe_layer_activation_bytes = 0;  // the same for an MoE layer
    int64_t layer_activation_bytes_no_recompute = 0;
};

RankShapes rank_shapes(const ModelDesc& m, const Layout& l, int stage);
// One chunk (virtual stage chunk * pp + stage) of a rank: its layers only, `first` / `last` for the virtual stages
// that hold the embedding / the head, chunks = 1. Parameters stay the rank's (they are not split by chunk).
RankShapes chunk_shapes(const ModelDesc& m, const Layout& l, int stage, int chunk);

// How many micro-batches (and chunks of a stage's layers) a stage holds at its peak, from the schedule the engine
// runs (common/schedule/pipeline_schedule.h).
struct StageInFlight {
    int micro_batches = 1;
    int chunks = 1;                    // (micro-batch, chunk) pairs
    int last_chunk_micro_batches = 1;  // micro-batches whose head activations the last stage holds at once
};
std::vector<StageInFlight> stages_in_flight(const Layout& l);

struct Gemm {
    int64_t m = 0, n = 0, k = 0;
    double count = 1;  // how many per micro-batch (experts: E/ep)
    double flops() const { return 2.0 * double(m) * double(n) * double(k); }
};

// Work per micro-batch on one rank of a stage, forward (backward: twice the GEMMs, and the factors in
// step_time.cpp). Memory-bound ops are counted in elements of their natural size, forward and backward together.
struct WorkInventory {
    std::vector<Gemm> layer_gemms;        // one dense layer's forward GEMMs
    std::vector<Gemm> moe_layer_gemms;    // one MoE layer's (router and the rank's experts)
    std::vector<Gemm> head_gemms;         // the last stage's output projection
    double attention_flops = 0;           // one layer's attention core, forward, the whole square: b (a/tp)
                                          // (s/cp) s d x 4 (what the engine records for the naive kernel)
    double attention_visible = 1;         // the share of that square a causal kernel that skips the masked keys
                                          // executes: the visible (query, key) pairs, (s + 1) / 2s
    double norm_elements = 0;             // one layer's norms: 2 R h
    double elementwise_elements = 0;      // one layer's: biases, activation function, residuals (docs/planner.md)
    double moe_elementwise_elements = 0;  // one MoE layer's on top: the router's softmax and top-k, the dispatch,
                                          // combine and weighting copies of the rank's expert rows
    double embedding_elements = 0;        // first stage: T h
    double loss_elements = 0;             // last stage: T ceil(v/tp)
    double final_norm_elements = 0;       // last stage: R h
};
WorkInventory work_inventory(const ModelDesc& m, const Layout& l, const RankShapes& r);

// The attention core's forward FLOPs per layer that the step-time model charges, one convention for prediction and
// calibration (docs/planner.md): what the kernel executes. Blockwise kernels (flash, the cp ring) skip the masked
// keys: the visible half. The naive kernel multiplies the whole square unless `naive_skips_masked` (the CPU
// engine's kernel takes the queries in row blocks against the keys they see; GPU kernels mask after the GEMM).
double executed_attention_flops(const WorkInventory& w, const Layout& l, bool naive_skips_masked);

// Executed over recorded attention FLOPs for a run of layout `l` at sequence `seq` (the engine's spans count the
// naive kernel's whole square, and a blockwise chunk pair on the diagonal as a whole chunk squared), summed over a
// context-parallel group: what `ultrascope calibrate` multiplies the recorded figures by.
double executed_over_recorded_attention(const Layout& l, int64_t seq, bool naive_skips_masked);

}  // namespace us::predict
