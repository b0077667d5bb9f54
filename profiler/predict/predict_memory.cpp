// The prediction's memory per rank (docs/memory.md, docs/formulas.md): model states by ZeRO's sharding, and the
// activations and temporaries a stage holds, found by walking the stage's own pipeline actions over the engine's
// per-block byte table (activation_bytes.h); beside them the textbook's figures for the same categories.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/core/memory_category.h"
#include "common/schedule/pipeline_schedule.h"
#include "profiler/predict/predict_shape.h"

namespace us::predict {

namespace {

// What an MoE block keeps beyond the engine's per-block table (which holds the router's part): the experts' rows,
// their inputs, hidden and GeLU outputs (Xe, C + 2F) with the outputs back on the tokens' side (X, C), and under ep
// the exchange's row order (2 Xe int32). Xe: the rows the rank's experts received (X under uniform routing). They
// live in allocations of the MoE layer's own (engine/model/moe.h).
int64_t moe_expert_rows_bytes(const RankShape& r, int64_t e) {
    return e * r.Xe * (r.C + 2 * r.F) + e * std::max<int64_t>(r.X, 1) * r.C +
           (r.ep > 1 ? 2 * 4 * std::max<int64_t>(r.Xe, 1) : 0);
}

// Per block per micro-batch (docs/memory.md): the engine's table, plus an MoE block's expert rows unless full
// recomputation keeps only the block's input.
int64_t block_bytes(const PredictInput& in, int64_t e, bool moe = false, int64_t layer = -1) {
    const RankShape r = rank_shape(in, layer);
    const Recompute mode = in.recompute;
    const int64_t rows = moe && mode != Recompute::full ? moe_expert_rows_bytes(r, e) : 0;
    return block_saved_bytes(r.act, mode, moe) + rows;
}

// Full recomputation's working set: everything of a block but its output, while the block is recomputed.
int64_t block_working_set_bytes(const PredictInput& in, int64_t e, bool moe = false) {
    const RankShape r = rank_shape(in);
    return block_working_bytes(r.act, Recompute::full, moe) + (moe ? moe_expert_rows_bytes(r, e) : 0);
}

// An MoE block's backward temporaries on top of the block's (docs/memory.md): the gradient rows on the tokens'
// side (X, C), under ep those on the experts' side and their input gradient (2 of (Xe, C)), the experts' hidden
// gradient (Xe, F), with bf16 a copy of the router's logit gradient (N, E); fp32 gate gradients (N, K), logit
// gradients (N, E) and balance-loss terms (B, E); the router's input gradient (N, C).
int64_t moe_backward_temporaries(const PredictInput& in, const RankShape& r, int64_t e) {
    return e * (r.X * r.C + (r.ep > 1 ? 2 * r.Xe * r.C : 0) + r.Xe * r.F + (in.bf16 ? r.N * r.E : 0)) +
           4 * (r.N * r.K + r.N * r.E + in.micro_batch * r.E) + e * r.N * r.C;
}

// The largest of the MoE blocks' backward temporaries on the stage (they differ only by their routing).
int64_t stage_moe_backward_temporaries(const PredictInput& in, int64_t e) {
    int64_t most = moe_backward_temporaries(in, rank_shape(in), e);
    if (in.moe_expert_load_most.empty()) return most;
    for (int c = 0; c < std::max(1, in.parallel.pp_chunks); ++c) {
        const auto [begin, end] = chunk_layers(in, c);
        for (int64_t l = begin; l < end; ++l)
            if (is_moe_layer(in, l))
                most = std::max(most, moe_backward_temporaries(in, rank_shape(in, l, &in.moe_expert_load_most), e));
    }
    return most;
}

// The saved bytes of the blocks of the rank's chunk `chunk`.
int64_t chunk_block_bytes(const PredictInput& in, int chunk, int64_t e) {
    const auto [begin, end] = chunk_layers(in, chunk);
    int64_t bytes = 0;
    for (int64_t l = begin; l < end; ++l) bytes += block_bytes(in, e, is_moe_layer(in, l), l);
    return bytes;
}

// The textbook's activation bytes per layer (docs/formulas.md, after Korthikanti et al.: 2-byte activations and 1-byte
// dropout masks, doubled here for fp32 runs).
int64_t formula_layer_bytes(const PredictInput& in, std::string& text) {
    const double s = double(in.seq), b = double(in.micro_batch), h = double(in.hidden), a = double(in.heads);
    const double tp = std::max(1, in.parallel.tp), scale = in.bf16 ? 1.0 : 2.0;
    // Selective recomputation drops the attention core's 5as/h (probabilities, their dropout mask, the softmax
    // input); flash attention never stores them either.
    const bool no_core = in.recompute == Recompute::selective || in.flash;
    const std::string why = in.recompute == Recompute::selective ? "selective" : "flash attention";
    const double attention = no_core ? 0.0 : 5.0 * a * s / h;
    double bytes;
    if (in.recompute == Recompute::full) {
        bytes = 2 * s * b * h;
        text = "2sbh (full recomputation: the layer input)";
    } else if (in.parallel.tp > 1 && in.parallel.sp) {
        bytes = s * b * h / tp * (34 + attention);
        text = no_core ? "(sbh/tp) 34 (TP + SP, " + why + ")" : "(sbh/tp)(34 + 5as/h) (TP + SP)";
    } else if (in.parallel.tp > 1) {
        bytes = s * b * h * (10 + 24 / tp + attention / tp);
        text = no_core ? "sbh(10 + 24/tp) (TP, " + why + ")" : "sbh(10 + 24/tp + 5as/(h tp)) (TP)";
    } else {
        bytes = s * b * h * (34 + attention);
        text = no_core ? "34 sbh (" + why + ")" : "sbh(34 + 5as/h)";
    }
    if (!in.bf16) text += ", x2 for fp32";
    if (in.parallel.cp > 1) {  // every activation is sequence-sharded: the single rank's figure / cp
        text += ", / cp";
        bytes /= double(in.parallel.cp);
    }
    return int64_t(bytes * scale);
}

struct StageMemory {
    int64_t activations = 0;  // peak
    int64_t deferred = 0;     // peak of the weight-gradient inputs kept between B and W (ZB-H1)
    // The most micro-batches' worth held at once, in chunks / V: interleaving holds chunks, a V-th of a micro-batch's
    // layers each (the textbook's pp (1 + (pp - 1)/(pp V)) on the first stage, not its ceiling)
    double micro_batches_held = 0;
};

// Walks one stage's actions in order (a stage's memory depends only on the order of its own actions):
// a forward keeps the micro-batch's tokens, its input (embedding output or received activations), its blocks'
// saved activations and, on the last virtual stage, the head's; a full backward frees them all; a split one (B)
// frees the input and the head and keeps the blocks plus each block's four weight-GEMM output gradients for W,
// which frees the rest.
StageMemory walk_stage_memory(const PredictInput& in, const std::vector<PipeAction>& actions, int64_t e) {
    const RankShape r = rank_shape(in);
    const int V = std::max(1, in.parallel.pp_chunks), S = std::max(1, in.parallel.pp) * V;
    const int64_t layers_per_chunk = in.layers / S;
    const int64_t input = embedding_saved_bytes(r.act);  // the embedding's output, or the activations received
    const int64_t deferred = layers_per_chunk * deferred_block_bytes(r.act);
    StageMemory m;
    int64_t acts = 0, pending = 0;
    for (const PipeAction& a : actions) {
        const bool head = a.chunk * in.parallel.pp + in.stage == S - 1;
        const int64_t kept = 2 * r.N * 4 + chunk_block_bytes(in, a.chunk, e);  // until the backward (or W) is done
        const int64_t until_b = input + (head ? head_saved_bytes(r.act) : 0);
        switch (a.op) {
            case PipeOp::forward:
                acts += kept + until_b;
                m.activations = std::max(m.activations, acts);
                break;
            case PipeOp::backward:
                acts -= kept + until_b;
                break;
            case PipeOp::backward_input:
                acts -= until_b;
                pending += deferred;
                m.deferred = std::max(m.deferred, pending);
                break;
            case PipeOp::backward_weight:
                acts -= kept;
                pending -= deferred;
                break;
        }
    }
    return m;
}

// The schedule runs at every pp, 1 included (the trainer always executes make_schedule's list): at pp 1 AFAB still
// runs all m forwards before the first backward and holds every micro-batch, the others one at a time. Sets the
// schedule's in-flight count and simulated bubble on `p`.
StageMemory walk_schedule(const PredictInput& in, int64_t e, Prediction& p) {
    const int V = std::max(1, in.parallel.pp_chunks);
    try {
        const PipelineShape shape{std::max(1, in.parallel.pp), int(in.grad_accum), V};
        const Schedule schedule = make_schedule(in.parallel.pp_schedule, shape);
        const Simulation sim = simulate_schedule(schedule, shape);
        p.micro_batches_in_flight = sim.max_in_flight[size_t(in.stage)];
        p.bubble_simulated = sim.bubble[size_t(in.stage)];
        StageMemory m = walk_stage_memory(in, schedule[size_t(in.stage)], e);
        m.micro_batches_held = double(sim.max_chunks_in_flight[size_t(in.stage)]) / double(V);
        return m;
    } catch (const std::exception&) {  // an invalid shape: say the worst, every micro-batch
        std::vector<PipeAction> all;
        for (int c = 0; c < V; ++c)
            for (int mb = 0; mb < int(in.grad_accum); ++mb) all.push_back({PipeOp::forward, mb, c});
        p.micro_batches_in_flight = int(in.grad_accum);
        StageMemory m = walk_stage_memory(in, all, e);
        m.micro_batches_held = double(in.grad_accum);
        return m;
    }
}

}  // namespace

void predict_model_states(const PredictInput& in, const RankContext& rc, Prediction& p) {
    const int64_t e = rc.e, n = rc.n, nx = rc.nx, dp = rc.dp, edp = rc.edp;
    // Weights, gradients, optimizer state (docs/formulas.md; ZeRO shards by dp, the experts' by edp).
    auto sharded = [&](int64_t bytes_per_param, bool shard) {
        return shard ? bytes_per_param * n / dp + bytes_per_param * nx / edp : bytes_per_param * (n + nx);
    };
    p.memory[size_t(MemCategory::params)] = sharded(e, in.parallel.zero >= 3);
    int64_t grads = sharded(e, in.parallel.zero >= 2);
    if (in.bf16 && in.fp32_grad_accum) grads += sharded(4, in.parallel.zero >= 2);
    p.memory[size_t(MemCategory::grads)] = grads;
    p.memory[size_t(MemCategory::master_params)] = in.bf16 ? sharded(4, in.parallel.zero >= 1) : 0;
    p.memory[size_t(MemCategory::optimizer_state)] = sharded(8, in.parallel.zero >= 1);
    // The textbook [S1, S4]: bytes per parameter (params e, grads e (+4 fp32 accumulation), master 4 with bf16,
    // Adam 8) over the rank's parameters, ZeRO-k dividing by the dp x cp ranks (the textbook knows no expert groups).
    const int64_t psi = p.params_on_rank;
    auto z = [&](int64_t bytes, bool shard) { return shard ? bytes * psi / dp : bytes * psi; };
    p.memory_formula[size_t(MemCategory::params)] = z(e, in.parallel.zero >= 3);
    p.memory_formula[size_t(MemCategory::grads)] =
        z(e + (in.bf16 && in.fp32_grad_accum ? 4 : 0), in.parallel.zero >= 2);
    p.memory_formula[size_t(MemCategory::master_params)] = in.bf16 ? z(4, in.parallel.zero >= 1) : 0;
    p.memory_formula[size_t(MemCategory::optimizer_state)] = z(8, in.parallel.zero >= 1);
}

void predict_activations(const PredictInput& in, const RankContext& rc, Prediction& p) {
    const RankShape& r = rc.r;
    const int64_t e = rc.e;
    // What a micro-batch holds from its forward to its backward (docs/memory.md), times how many the schedule keeps
    // in flight on this stage, found by walking the stage's own action list.
    p.activations_per_layer = block_bytes(in, e);
    if (in.moe_experts > 0) {
        p.activations_per_moe_layer = block_bytes(in, e, true);
        p.moe_rows_per_layer = r.X;
    }
    p.activations_per_layer_formula = formula_layer_bytes(in, p.activations_formula);
    const StageMemory held = walk_schedule(in, e, p);
    int64_t acts = held.activations;
    if (in.recompute == Recompute::full) {
        const int64_t head = rc.last ? head_saved_bytes(r.act) : 0;
        acts += std::max(block_working_set_bytes(in, e, rc.Lm > 0), head) - head;
    }
    p.memory[size_t(MemCategory::activations)] = acts;
    // One backward's activation gradients (docs/memory.md), and with bf16 the head's bf16 copy of dlogits.
    const int64_t scratch = backward_temporaries_bytes(r.act, rc.last);
    // A stage after the first writes its input gradient into a buffer of its own, to send it back.
    const bool sends_gradients = in.parallel.pp > 1 && (in.stage > 0 || std::max(1, in.parallel.pp_chunks) > 1);
    // On top of the scratch, a block's backward holds either its MoE part's temporaries or, later, blockwise
    // attention's (ring or flash): fp32 query gradients (N, Ca) and a delta per row (B, heads, T); on one rank
    // (flash) also the keys' and values' fp32 gradients (N, 2Ca), which a ring keeps in comm_buffers (flash reads
    // the keys and values themselves in qkv). Where the device fuses one rank's attention (whole_attention_fused),
    // only the deltas.
    const int64_t deltas = 4 * in.micro_batch * r.heads * r.T;
    const int64_t blockwise_backward = !r.blockwise() ? 0
                                       : whole_attention_fused(r.act, in.cuda)
                                           ? deltas
                                           : 4 * r.N * r.Ca + deltas + (r.cp == 1 ? 4 * 2 * r.N * r.Ca : 0);
    p.memory[size_t(MemCategory::temporaries)] =
        scratch + (sends_gradients ? e * r.R * in.hidden : 0) + held.deferred +
        std::max(rc.Lm > 0 ? stage_moe_backward_temporaries(in, e) : 0, blockwise_backward);
    // The textbook [S2]: per layer x the stage's layers x the micro-batches the schedule keeps in flight, counted in
    // chunks where interleaved [S5] (it has no formula for MoE blocks).
    if (in.moe_experts == 0)
        p.memory_formula[size_t(MemCategory::activations)] =
            int64_t(std::llround(double(p.activations_per_layer_formula * rc.Ls) * held.micro_batches_held));
    p.memory[size_t(MemCategory::comm_buffers)] = std::nullopt;  // transient buffers: measured, not modelled
    p.memory[size_t(MemCategory::workspace)] = std::nullopt;     // op scratch: measured, not modelled
}

}  // namespace us::predict
