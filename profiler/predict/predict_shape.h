// What the prediction's parts (predict.cpp, predict_memory.cpp, predict_comm.cpp) share about one rank: the layers
// its pipeline stage holds, the shapes of one micro-batch on it (the engine's ActivationShape, from
// activation_bytes.h, plus what the mixture of experts routes), and the parameter counts its states shard.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/core/activation_bytes.h"
#include "profiler/predict/predict.h"

namespace us::predict {

inline int64_t layers_on_stage(const PredictInput& in) { return in.layers / std::max(1, in.parallel.pp); }

inline bool is_moe_layer(const PredictInput& in, int64_t layer) {
    return in.moe_experts > 0 && layer % in.moe_every == in.moe_every - 1;
}

// The layers [begin, end) of the rank's chunk `chunk` (virtual stage chunk * pp + stage), as the trainer cuts them.
inline std::pair<int64_t, int64_t> chunk_layers(const PredictInput& in, int chunk) {
    const int64_t pp = std::max(1, in.parallel.pp), V = std::max(1, in.parallel.pp_chunks), per = in.layers / (pp * V);
    const int64_t vs = chunk * pp + in.stage;
    return {vs * per, (vs + 1) * per};
}

inline int64_t moe_layers_on_stage(const PredictInput& in) {
    int64_t n = 0;
    for (int c = 0; c < std::max(1, in.parallel.pp_chunks); ++c) {
        const auto [begin, end] = chunk_layers(in, c);
        for (int64_t l = begin; l < end; ++l) n += is_moe_layer(in, l);
    }
    return n;
}

// The shapes of one micro-batch on a rank (the engine's ActivationShape): N token rows, R rows of the residual
// stream (N/tp under sequence parallelism), Ca = h/tp and F = 4h/tp the rank's share of attention and MLP, Vr its
// vocabulary rows, heads its attention heads.
struct RankShape {
    int64_t N, R, C, Ca, F, Vr, heads, T;
    int64_t E, K, X;  // mixture of experts: experts, choices per token, the rank's kept choices (uniform routing)
    int64_t Xe;       // rows the rank's experts receive: X, or under ep X x the layer's measured load
    bool sp, flash;
    int tp, cp, ep;
    ActivationShape act;  // the same micro-batch as the engine describes it (activation_bytes.h)
    bool blockwise() const { return cp > 1 || flash; }  // ring attention, or --attention flash
};

// The choices an MoE block keeps from n tokens if routing were uniform: all n K, or E times the capacity
// ceil(n K / E * factor) when that is fewer (the engine's moe_capacity).
int64_t uniform_kept_rows(const PredictInput& in, int64_t n);

// `layer`: the model layer whose expert load (`load`, per layer; by default in.moe_expert_load) applies (-1: uniform
// routing).
RankShape rank_shape(const PredictInput& in, int64_t layer = -1, const std::vector<double>* load = nullptr);

// One rank's place and parameter counts, worked out once for the memory and the communication figures.
struct RankContext {
    RankShape r;
    int64_t e = 4;                   // bytes per activation, parameter and gradient element (bf16: 2)
    bool first = true, last = true;  // first / last pipeline stage
    int64_t Ls = 0, Lm = 0;          // the stage's blocks, and of them MoE blocks
    int64_t n = 0, nx = 0;           // the rank's parameters outside and inside experts
    int64_t dp = 1, edp = 1;         // ranks the states shard over: dp x cp, and the experts' dp/ep x cp
};

// Weights, gradients, optimizer state: predicted and by the textbook (predict_memory.cpp).
void predict_model_states(const PredictInput& in, const RankContext& rc, Prediction& p);
// Activations and temporaries, by walking the stage's own schedule; the schedule's in-flight count and bubble.
void predict_activations(const PredictInput& in, const RankContext& rc, Prediction& p);
// Bytes sent per step by process group, and the collectives behind them (predict_comm.cpp).
void predict_communication(const PredictInput& in, const RankContext& rc, Prediction& p);

}  // namespace us::predict
