#include "profiler/analysis/predict.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/core/format.h"
#include "common/core/memory_category.h"
#include "common/schedule/pipeline_schedule.h"
#include "profiler/analysis/step_breakdown.h"

namespace us::prof {

namespace {

int64_t layers_on_stage(const PredictInput& in, int) { return in.layers / std::max(1, in.pp); }

bool is_moe_layer(const PredictInput& in, int64_t layer) {
    return in.moe_experts > 0 && layer % in.moe_every == in.moe_every - 1;
}

// The layers [begin, end) of the rank's chunk `chunk` (virtual stage chunk * pp + stage), as the trainer cuts them.
std::pair<int64_t, int64_t> chunk_layers(const PredictInput& in, int chunk) {
    const int64_t pp = std::max(1, in.pp), V = std::max(1, in.pp_chunks), per = in.layers / (pp * V);
    const int64_t vs = chunk * pp + in.stage;
    return {vs * per, (vs + 1) * per};
}

int64_t moe_layers_on_stage(const PredictInput& in) {
    int64_t n = 0;
    for (int c = 0; c < std::max(1, in.pp_chunks); ++c) {
        const auto [begin, end] = chunk_layers(in, c);
        for (int64_t l = begin; l < end; ++l) n += is_moe_layer(in, l);
    }
    return n;
}

// The choices an MoE block keeps from n tokens if routing were uniform: all n K, or E times the capacity
// ceil(n K / E * factor) when that is fewer (the engine's moe_capacity).
int64_t uniform_kept_rows(const PredictInput& in, int64_t n) {
    const int64_t choices = n * in.moe_topk;
    if (in.moe_capacity_factor <= 0 || in.moe_experts == 0) return choices;
    const int64_t capacity = int64_t(std::ceil(double(n) * double(in.moe_topk) / double(in.moe_experts) *
                                               in.moe_capacity_factor));
    return std::min(choices, in.moe_experts * capacity);
}

// The shapes of one micro-batch on a rank (the engine's ActivationShape): N token rows, R rows of the residual
// stream (N/tp under sequence parallelism), Ca = h/tp and F = 4h/tp the rank's share of attention and MLP, Vr its
// vocabulary rows, heads its attention heads.
struct RankShape {
    int64_t N, R, C, Ca, F, Vr, heads, probs, T;
    int64_t E, K, X;  // mixture of experts: experts, choices per token, the rank's kept choices (uniform routing)
    int64_t Xe;       // rows the rank's experts receive: X, or under ep X x the layer's measured load
    bool sp, flash;
    int tp, cp, ep;
    bool blockwise() const { return cp > 1 || flash; }  // ring attention, or --attention flash
    int64_t attention_saved(int64_t e) const {  // probabilities, or blockwise attention's log-sum-exp
        return blockwise() ? 4 * N / T * heads * T : e * probs;
    }
};
// `layer`: the model layer whose expert load (`load`, per layer) applies (-1: uniform routing).
RankShape rank_shape(const PredictInput& in, int64_t layer = -1, const std::vector<double>* load = nullptr) {
    RankShape r;
    r.tp = std::max(1, in.tp);
    r.cp = std::max(1, in.cp);
    r.sp = in.sp && r.tp > 1;
    r.flash = in.flash;
    r.T = in.seq / r.cp;  // the rank's positions of a sequence
    r.N = in.micro_batch * r.T;
    r.R = r.sp ? r.N / r.tp : r.N;
    r.C = in.hidden;
    r.Ca = in.hidden / r.tp;
    r.F = 4 * in.hidden / r.tp;
    r.Vr = (in.vocab + r.tp - 1) / r.tp;
    r.heads = in.heads / r.tp;
    r.probs = in.micro_batch * r.heads * in.seq * in.seq;
    r.ep = std::max(1, in.ep);
    r.E = in.moe_experts, r.K = in.moe_topk;
    r.X = uniform_kept_rows(in, r.N);  // the rank's kept choices; uniform routing sends as many back
    r.Xe = r.X;
    if (!load) load = &in.moe_expert_load;
    if (r.ep > 1 && layer >= 0 && size_t(layer) < load->size())
        r.Xe = int64_t(std::llround(double(r.X) * (*load)[size_t(layer)]));
    return r;
}

// Per block per micro-batch, docs/memory.md: ln1, residual2, ln2 and output (R,C); qkv (N,3Ca), atty (N,Ca),
// fch and fch_gelu (N,F); probs (B, heads, s, s), or under cp the ring's log-sum-exp (B, heads, s/cp) fp32 in every
// mode; four fp32 LayerNorm statistics of R. An MoE block keeps, instead of fch and fch_gelu, the router's fp32
// probabilities (N,E), its choices, gates and rows (N,K) and the experts' rows: their inputs, hidden and GeLU
// outputs (Xe, C + 2F) with the outputs back on the tokens' side (X, C), and under ep the exchange's row order
// (2 Xe int32). Xe: the rows the rank's experts received (X under uniform routing).
int64_t moe_bytes(const RankShape& r, int64_t e) {
    return 4 * r.N * r.E + 3 * 4 * r.N * r.K + e * r.Xe * (r.C + 2 * r.F) + e * std::max<int64_t>(r.X, 1) * r.C +
           (r.ep > 1 ? 2 * 4 * std::max<int64_t>(r.Xe, 1) : 0);
}

int64_t block_bytes(const PredictInput& in, int64_t e, bool moe = false, int64_t layer = -1) {
    const RankShape r = rank_shape(in, layer);
    if (in.recompute == "full") return e * r.R * r.C;
    const int64_t stats = 16 * r.R;
    const int64_t mlp = moe ? moe_bytes(r, e) : e * 2 * r.N * r.F;
    const int64_t tensors = e * (4 * r.R * r.C + 4 * r.N * r.Ca) + mlp;
    if (in.recompute == "selective" && !r.blockwise()) return tensors + stats;
    return tensors + r.attention_saved(e) + stats;
}

// Full recomputation's working set: everything of a block but its output, while the block is recomputed.
int64_t block_working_bytes(const PredictInput& in, int64_t e, bool moe = false) {
    const RankShape r = rank_shape(in);
    const int64_t mlp = moe ? moe_bytes(r, e) : e * 2 * r.N * r.F;
    return e * (3 * r.R * r.C + 4 * r.N * r.Ca) + mlp + r.attention_saved(e) + 16 * r.R;
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
    for (int c = 0; c < std::max(1, in.pp_chunks); ++c) {
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

// The final norm output and statistics (R rows), fp32 logits of the rank's vocabulary, losses, and under tensor
// parallelism the vocabulary-parallel softmax statistics (N,3).
int64_t head_bytes(const PredictInput& in, int64_t e) {
    const RankShape r = rank_shape(in);
    return e * r.R * r.C + 2 * r.R * 4 + r.N * r.Vr * 4 + r.N * 4 + (r.tp > 1 ? 3 * r.N * 4 : 0);
}

// The textbook's activation bytes per layer (docs/formulas.md, after Korthikanti et al.: 2-byte activations and 1-byte
// dropout masks, doubled here for fp32 runs).
int64_t formula_layer_bytes(const PredictInput& in, std::string& text) {
    const double s = double(in.seq), b = double(in.micro_batch), h = double(in.hidden), a = double(in.heads);
    const double tp = std::max(1, in.tp), scale = in.bf16 ? 1.0 : 2.0;
    // Selective recomputation drops the attention core's 5as/h (probabilities, their dropout mask, the softmax
    // input); flash attention never stores them either.
    const bool no_core = in.recompute == "selective" || in.flash;
    const std::string why = in.recompute == "selective" ? "selective" : "flash attention";
    const double attention = no_core ? 0.0 : 5.0 * a * s / h;
    double bytes;
    if (in.recompute == "full") {
        bytes = 2 * s * b * h;
        text = "2sbh (full recomputation: the layer input)";
    } else if (in.tp > 1 && in.sp) {
        bytes = s * b * h / tp * (34 + attention);
        text = no_core ? "(sbh/tp) 34 (TP + SP, " + why + ")" : "(sbh/tp)(34 + 5as/h) (TP + SP)";
    } else if (in.tp > 1) {
        bytes = s * b * h * (10 + 24 / tp + attention / tp);
        text = no_core ? "sbh(10 + 24/tp) (TP, " + why + ")" : "sbh(10 + 24/tp + 5as/(h tp)) (TP)";
    } else {
        bytes = s * b * h * (34 + attention);
        text = no_core ? "34 sbh (" + why + ")" : "sbh(34 + 5as/h)";
    }
    if (!in.bf16) text += ", x2 for fp32";
    if (in.cp > 1) {  // every activation is sequence-sharded: the single rank's figure / cp
        text += ", / cp";
        bytes /= double(in.cp);
    }
    return int64_t(bytes * scale);
}

struct StageMemory {
    int64_t activations = 0;  // peak
    int64_t deferred = 0;     // peak of the weight-gradient inputs kept between B and W (ZB-H1)
};

// Walks one stage's actions in order (a stage's memory depends only on the order of its own actions):
// a forward keeps the micro-batch's tokens, its input (embedding output or received activations), its blocks'
// saved activations and, on the last virtual stage, the head's; a full backward frees them all; a split one (B)
// frees the input and the head and keeps the blocks plus each block's four weight-GEMM output gradients for W,
// which frees the rest.
StageMemory walk_stage_memory(const PredictInput& in, const std::vector<PipeAction>& actions, int64_t e) {
    const RankShape r = rank_shape(in);
    const int V = std::max(1, in.pp_chunks), S = std::max(1, in.pp) * V;
    const int64_t layers_per_chunk = in.layers / S;
    const int64_t input = e * r.R * r.C;
    const int64_t deferred = layers_per_chunk * (2 * r.N * r.C + r.N * r.F + 3 * r.N * r.Ca) * e;
    StageMemory m;
    int64_t acts = 0, pending = 0;
    for (const PipeAction& a : actions) {
        const bool head = a.chunk * in.pp + in.stage == S - 1;
        const int64_t kept = 2 * r.N * 4 + chunk_block_bytes(in, a.chunk, e);  // until the backward (or W) is done
        const int64_t until_b = input + (head ? head_bytes(in, e) : 0);
        switch (a.op) {
            case PipeOp::forward:
                acts += kept + until_b;
                m.activations = std::max(m.activations, acts);
                break;
            case PipeOp::backward: acts -= kept + until_b; break;
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

// Every collective a rank issues per step in its tensor-parallel group (docs/formulas.md, "Tensor parallelism: what
// the engine sends"). K = one (N,C) activation in the compute dtype.
std::vector<PredictedCollective> tp_collectives(const PredictInput& in, int64_t e, int64_t replicated_grad_bytes,
                                                bool first, bool last) {
    const RankShape r = rank_shape(in);
    std::vector<PredictedCollective> out;
    if (r.tp == 1) return out;
    const int64_t K = r.N * r.C * e, m = in.grad_accum, blocks = layers_on_stage(in, in.stage);
    const int64_t recompute = in.recompute == "full" ? 2 : 1;  // full recomputation runs the forward's again
    auto add = [&](std::string what, OpClass op, int64_t bytes, int64_t count) {
        if (count > 0) out.push_back({std::move(what), op, bytes, count});
    };
    using O = OpClass;
    if (!r.sp) {
        add("blocks: reduce_from_tp_region (attention and MLP outputs)", O::all_reduce, K, 2 * blocks * m * recompute);
        add("blocks: copy_to_tp_region backward (LayerNorm output gradients)", O::all_reduce, K, 2 * blocks * m);
        add("embedding: reduce_from_tp_region", O::all_reduce, K, first ? m : 0);
        add("head: copy_to_tp_region backward", O::all_reduce, K, last ? m : 0);
    } else {
        add("blocks: gather_from_sp_region (LayerNorm outputs)", O::all_gather, K, 2 * blocks * m * recompute);
        add("blocks: reduce_scatter_to_sp_region (attention and MLP outputs)", O::reduce_scatter, K,
            2 * blocks * m * recompute);
        add("blocks: reduce_scatter_to_sp_region backward (output gradients)", O::all_gather, K, 2 * blocks * m);
        add("blocks: LayerNorm outputs re-gathered for the weight gradients", O::all_gather, K, 2 * blocks * m);
        add("blocks: gather_from_sp_region backward (input gradients)", O::reduce_scatter, K, 2 * blocks * m);
        add("embedding: reduce_scatter_to_sp_region", O::reduce_scatter, K, first ? m : 0);
        add("embedding: its output gradient gathered", O::all_gather, K, first ? m : 0);
        add("head: final norm output gathered, and again in backward", O::all_gather, K, last ? 2 * m : 0);
        add("head: gather_from_sp_region backward", O::reduce_scatter, K, last ? m : 0);
        add("replicated parameters' gradients (once per step)", O::all_reduce, replicated_grad_bytes, 1);
    }
    add("MoE blocks: the gates' gradient (partial over tp like the experts' outputs)", O::all_reduce, r.N * r.K * 4,
        moe_layers_on_stage(in) * m);
    add("vocab-parallel cross-entropy: max", O::all_reduce, r.N * 4, last ? m : 0);
    add("vocab-parallel cross-entropy: sum and target logit", O::all_reduce, 2 * r.N * 4, last ? m : 0);
    return out;
}

// The ring's transfers a rank sends per step (docs/formulas.md): per layer and micro-batch, forward passes its
// key/value block on cp - 1 times; backward passes the blocks on again cp - 1 times and a partial key/value gradient
// (fp32) cp times, the last one to the block's owner. Full recomputation runs the forward's ring again.
std::vector<PredictedCollective> cp_collectives(const PredictInput& in, int64_t e) {
    const RankShape r = rank_shape(in);
    std::vector<PredictedCollective> out;
    if (r.cp == 1) return out;
    const int64_t kv = 2 * r.N * r.Ca, m = in.grad_accum, blocks = layers_on_stage(in, in.stage);
    const int64_t recompute = in.recompute == "full" ? 2 : 1;
    out.push_back({"ring attention: key/value blocks", OpClass::send, kv * e, (r.cp - 1) * blocks * m * (recompute + 1)});
    out.push_back({"ring attention: key/value gradient blocks (fp32)", OpClass::send, kv * 4, r.cp * blocks * m});
    // MoE blocks: each sequence's routing statistics for the balance loss, gathered over the ranks of its positions
    const int64_t moe = moe_layers_on_stage(in);
    if (moe > 0)
        out.push_back({"MoE blocks: per-sequence routing statistics (all-gather, fp64)", OpClass::all_gather,
                       2 * in.micro_batch * r.E * 8 * r.cp, moe * m * recompute});
    return out;
}

// Expert parallelism's all-to-alls a rank issues per step (docs/formulas.md): per MoE block and micro-batch the
// row counts once, then the rows to the experts and back in forward, and the rows' gradients the same two ways in
// backward; full recomputation runs the forward's again. Bytes are what the rank sends to the others, with routing
// uniform: (ep - 1)/ep of its kept choices' rows of h values.
std::vector<PredictedCollective> ep_collectives(const PredictInput& in, int64_t e) {
    const RankShape r = rank_shape(in);
    std::vector<PredictedCollective> out;
    if (r.ep == 1) return out;
    const int64_t m = in.grad_accum, blocks = moe_layers_on_stage(in), forwards = in.recompute == "full" ? 2 : 1;
    const int64_t rows = r.X * (r.ep - 1) / r.ep * r.C * e;
    out.push_back({"row counts per expert", OpClass::all_to_all, (r.ep - 1) * (r.E / r.ep) * 4, forwards * blocks * m});
    out.push_back({"forward: rows to the experts and back", OpClass::all_to_all, rows, 2 * forwards * blocks * m});
    out.push_back({"backward: row gradients to the experts and back", OpClass::all_to_all, rows, 2 * blocks * m});
    return out;
}

// ZeRO-3's parameter all-gathers (the engine's walk: engine/parallel/zero_state.cpp over engine/model/gpt.cpp's
// acquires and releases). Buckets follow plan_buckets' rule: units grouped from the last one backward until a bucket
// holds bucket_mb of parameters. Acquiring a unit gathers its bucket unless it is already held, and a block also
// prefetches the pass's next bucket; a bucket is freed when its last user releases it, so a bucket holding several
// units is gathered again for each use that finds it freed.
struct UnitUse {
    int unit;
    bool acquire, forward;
};
int64_t zero3_gathered_elements(const std::vector<int64_t>& numel, const std::vector<bool>& is_block, double bucket_mb,
                                int64_t e, const std::vector<UnitUse>& uses) {
    const int units = int(numel.size());
    if (units == 0) return 0;
    const int64_t target = int64_t(bucket_mb * 1024 * 1024 / double(e));
    std::vector<int> bucket_of(size_t(units), 0);
    std::vector<int64_t> bucket_numel;
    for (int u = units - 1; u >= 0;) {  // from the last unit backward; numbered forward afterwards
        int64_t n = numel[size_t(u)];
        bucket_of[size_t(u--)] = int(bucket_numel.size());
        while (u >= 0 && n < target) {
            n += numel[size_t(u)];
            bucket_of[size_t(u--)] = int(bucket_numel.size());
        }
        bucket_numel.push_back(n);
    }
    const int buckets = int(bucket_numel.size());
    for (int& b : bucket_of) b = buckets - 1 - b;
    std::reverse(bucket_numel.begin(), bucket_numel.end());
    std::vector<bool> held(size_t(buckets), false);
    std::vector<int> users(size_t(buckets), 0);
    int64_t gathered = 0;
    auto gather = [&](int b) {
        if (held[size_t(b)]) return;
        held[size_t(b)] = true;
        gathered += bucket_numel[size_t(b)];
    };
    for (const UnitUse& use : uses) {
        const int b = bucket_of[size_t(use.unit)];
        if (use.acquire) {
            gather(b);
            ++users[size_t(b)];
            const int next = use.forward ? b + 1 : b - 1;
            if (is_block[size_t(use.unit)] && next >= 0 && next < buckets) gather(next);
        } else if (--users[size_t(b)] == 0) {
            held[size_t(b)] = false;
        }
    }
    return gathered;
}

}  // namespace

PredictInput PredictInput::from_config(const nlohmann::json& c) {
    PredictInput in;
    auto get = [&](const char* key, auto fallback) { return c.contains(key) && !c[key].is_null() ? c[key].get<decltype(fallback)>() : fallback; };
    in.vocab = get("vocab", in.vocab);
    in.hidden = get("hidden", in.hidden);
    in.layers = get("layers", in.layers);
    in.heads = get("heads", in.heads);
    in.seq = get("seq", in.seq);
    in.moe_experts = get("moe_experts", in.moe_experts);
    in.moe_topk = get("moe_topk", in.moe_topk);
    in.moe_every = get("moe_every", in.moe_every);
    in.moe_capacity_factor = get("moe_capacity_factor", in.moe_capacity_factor);
    in.micro_batch = get("batch", in.micro_batch);
    in.grad_accum = get("grad_accum", in.grad_accum);
    in.bf16 = get("precision", std::string("fp32")) == "bf16";
    in.fp32_grad_accum = get("fp32_grad_accum", false);
    in.recompute = get("recompute", in.recompute);
    in.dp = get("dp", in.dp);
    in.pp = get("pp", in.pp);
    in.tp = get("tp", in.tp);
    in.sp = get("sp", false);
    in.cp_balance = get("cp_balance", in.cp_balance);
    in.cp = get("cp", in.cp);
    in.flash = get("attention", std::string("naive")) == "flash";
    in.ep = get("ep", in.ep);
    in.zero = get("zero", in.zero);
    in.pp_schedule = get("pp_schedule", in.pp_schedule);
    in.pp_chunks = get("pp_chunks", in.pp_chunks);
    in.bucket_mb = get("bucket_mb", in.bucket_mb);
    return in;
}

int64_t Prediction::memory_total() const {
    int64_t t = 0;
    for (const auto& m : memory) t += m.value_or(0);
    return t;
}

int64_t Prediction::memory_formula_total() const {
    int64_t t = 0;
    for (const auto& m : memory_formula) t += m.value_or(0);
    return t;
}

Prediction predict(const PredictInput& in) {
    Prediction p;
    const int64_t h = in.hidden, v = in.vocab, L = in.layers;
    const RankShape r = rank_shape(in);
    const int64_t tp = r.tp;
    // N = h*v + L_dense*(12h^2 + 13h) + L_moe*(4h^2 + 8h + hE + E(8h^2 + 5h)) + 2h; active: K experts for E.
    int64_t moe_layers = 0;
    for (int64_t l = 0; l < L; ++l) moe_layers += is_moe_layer(in, l);
    const int64_t expert = 8 * h * h + 5 * h, moe_block = 4 * h * h + 8 * h + h * in.moe_experts;
    p.params = h * v + (L - moe_layers) * (12 * h * h + 13 * h) + moe_layers * (moe_block + in.moe_experts * expert) + 2 * h;
    p.active_params = p.params - moe_layers * (in.moe_experts - in.moe_topk) * expert;
    const bool first = in.stage == 0, last = in.stage == in.pp - 1;
    const int64_t Ls = layers_on_stage(in, in.stage), Lm = moe_layers_on_stage(in);
    // N_tp = h*ceil(v/tp) + L*(12h^2/tp + 7h/tp + 6h) + 2h: the block matrices and the column-parallel biases split,
    // the LayerNorms and row-parallel biases whole, the vocabulary padded to a multiple of tp. An MoE block keeps
    // the attention's 4h^2/tp + 3h/tp + 5h and the router's hE whole; each of its E/ep experts 8h^2/tp + 4h/tp + h.
    const int64_t block_params = (Ls - Lm) * (12 * h * h / tp + 7 * h / tp + 6 * h) +
                                 Lm * (4 * h * h / tp + 3 * h / tp + 5 * h + h * in.moe_experts);
    p.expert_params_on_rank = Lm * (in.moe_experts / r.ep) * (8 * h * h / tp + 4 * h / tp + h);
    p.params_on_rank = block_params + (first || last ? h * r.Vr : 0) + (last ? 2 * h : 0) + p.expert_params_on_rank;
    const int64_t n = p.params_on_rank - p.expert_params_on_rank, nx = p.expert_params_on_rank;
    const int64_t e = in.bf16 ? 2 : 4;
    // The data-parallel reduction and ZeRO run over dp x cp ranks (cp ranks hold partial gradients of the same
    // parameters); an MoE block's experts over the dp/ep x cp ranks that hold the same experts.
    const int64_t dp = int64_t(in.dp) * std::max(1, in.cp), edp = int64_t(in.dp / r.ep) * std::max(1, in.cp);

    // Weights, gradients, optimizer state (docs/formulas.md; ZeRO shards by dp, the experts' by edp).
    auto sharded = [&](int64_t bytes_per_param, bool shard) {
        return shard ? bytes_per_param * n / dp + bytes_per_param * nx / edp : bytes_per_param * (n + nx);
    };
    p.memory[size_t(MemCategory::params)] = sharded(e, in.zero >= 3);
    int64_t grads = sharded(e, in.zero >= 2);
    if (in.bf16 && in.fp32_grad_accum) grads += sharded(4, in.zero >= 2);
    p.memory[size_t(MemCategory::grads)] = grads;
    p.memory[size_t(MemCategory::master_params)] = in.bf16 ? sharded(4, in.zero >= 1) : 0;
    p.memory[size_t(MemCategory::optimizer_state)] = sharded(8, in.zero >= 1);

    // Activations and temporaries: what a micro-batch holds from its forward to its backward (docs/memory.md),
    // times how many the schedule keeps in flight on this stage, found by walking the stage's own action list.
    p.activations_per_layer = block_bytes(in, e);
    if (in.moe_experts > 0) {
        p.activations_per_moe_layer = block_bytes(in, e, true);
        p.moe_rows_per_layer = r.X;
    }
    p.activations_per_layer_formula = formula_layer_bytes(in, p.activations_formula);
    const int V = std::max(1, in.pp_chunks);
    // One backward's activation gradients (docs/memory.md), and with bf16 the head's bf16 copy of dlogits.
    const int64_t scratch = e * (r.R * r.C + r.N * r.C + 3 * r.N * r.Ca + r.N * r.F) +
                            (r.sp ? e * (r.N * r.C + r.R * r.C) : 0) + (last && in.bf16 ? 2 * r.N * r.Vr : 0);
    // The schedule runs at every pp, 1 included (the trainer always executes make_schedule's list): at pp 1 AFAB
    // still runs all m forwards before the first backward and holds every micro-batch, the others one at a time.
    StageMemory held;
    try {
        const PipelineShape shape{std::max(1, in.pp), int(in.grad_accum), V};
        const Schedule schedule = make_schedule(in.pp_schedule, shape);
        const Simulation sim = simulate_schedule(schedule, shape);
        p.micro_batches_in_flight = sim.max_in_flight[size_t(in.stage)];
        p.bubble_simulated = sim.bubble[size_t(in.stage)];
        held = walk_stage_memory(in, schedule[size_t(in.stage)], e);
    } catch (const std::exception&) {  // an invalid shape: say the worst, every micro-batch
        std::vector<PipeAction> all;
        for (int c = 0; c < V; ++c)
            for (int mb = 0; mb < int(in.grad_accum); ++mb) all.push_back({PipeOp::forward, mb, c});
        held = walk_stage_memory(in, all, e);
        p.micro_batches_in_flight = int(in.grad_accum);
    }
    int64_t acts = held.activations;
    if (in.recompute == "full")
        acts += std::max(block_working_bytes(in, e, Lm > 0), last ? head_bytes(in, e) : int64_t(0)) -
                (last ? head_bytes(in, e) : 0);
    p.memory[size_t(MemCategory::activations)] = acts;
    // A stage after the first writes its input gradient into a buffer of its own, to send it back.
    const bool sends_gradients = in.pp > 1 && (in.stage > 0 || V > 1);
    // On top of the scratch, a block's backward holds either its MoE part's temporaries or, later, blockwise
    // attention's (ring or flash): fp32 query gradients (N, Ca) and a delta per row (B, heads, T); on one rank
    // (flash) also the keys' and values' fp32 gradients (N, 2Ca), which a ring keeps in comm_buffers (flash reads
    // the keys and values themselves in qkv).
    const int64_t blockwise_backward =
        !r.blockwise() ? 0 : 4 * (r.N * r.Ca + in.micro_batch * r.heads * r.T) + (r.cp == 1 ? 4 * 2 * r.N * r.Ca : 0);
    p.memory[size_t(MemCategory::temporaries)] = scratch + (sends_gradients ? e * r.R * h : 0) + held.deferred +
                                                 std::max(Lm > 0 ? stage_moe_backward_temporaries(in, e) : 0,
                                                          blockwise_backward);
    // The textbook [S1, S4]: bytes per parameter (params e, grads e (+4 fp32 accumulation), master 4 with bf16,
    // Adam 8) over the rank's parameters, ZeRO-k dividing by the dp x cp ranks (the textbook knows no expert
    // groups); activations [S2] per layer x the stage's layers x the micro-batches the schedule keeps in flight.
    {
        const int64_t psi = p.params_on_rank;
        auto z = [&](int64_t bytes, bool shard) { return shard ? bytes * psi / dp : bytes * psi; };
        p.memory_formula[size_t(MemCategory::params)] = z(e, in.zero >= 3);
        p.memory_formula[size_t(MemCategory::grads)] = z(e + (in.bf16 && in.fp32_grad_accum ? 4 : 0), in.zero >= 2);
        p.memory_formula[size_t(MemCategory::master_params)] = in.bf16 ? z(4, in.zero >= 1) : 0;
        p.memory_formula[size_t(MemCategory::optimizer_state)] = z(8, in.zero >= 1);
        if (in.moe_experts == 0)
            p.memory_formula[size_t(MemCategory::activations)] =
                p.activations_per_layer_formula * Ls * int64_t(p.micro_batches_in_flight);
    }
    p.memory[size_t(MemCategory::comm_buffers)] = std::nullopt;  // transient buffers: measured, not modelled
    p.memory[size_t(MemCategory::workspace)] = std::nullopt;     // op scratch: measured, not modelled

    p.flops_per_token = 6.0 * double(p.active_params) + 12.0 * double(L * h * in.seq);
    p.tokens_per_step = in.micro_batch * in.grad_accum * in.seq * in.dp;

    // Communication per rank per step (bytes sent, ring algorithms). dp: K gradient bytes of the rank's shard of
    // the model; ZeRO-0 and 1 all-reduce (or reduce-scatter + all-gather) them once per step, ZeRO-2 reduce-scatters
    // at every micro-batch, ZeRO-3 also all-gathers the parameters for every forward and backward.
    const double ring = dp > 1 ? double(dp - 1) / double(dp) : 0.0;
    const double grad_bytes_per_param = double(e) + (in.bf16 && in.fp32_grad_accum ? 2.0 : 0.0);
    const double m = double(in.grad_accum);
    const double dp_collectives = in.zero <= 1 ? 2.0 : in.zero == 2 ? m + 1.0 : m;  // ZeRO-3: its reduce-scatters
    p.comm_bytes[1] = int64_t(dp_collectives * grad_bytes_per_param * double(n) * ring);
    if (in.zero >= 3 && in.pp == 1) {
        // plus the parameter gathers of every micro-batch's forward and backward (ZeRO-3 runs without pipelines).
        // Units of the rank's layout: embedding, blocks, final norm; an MoE block's experts are a state of their
        // own (their gathers go to edp below).
        std::vector<int64_t> numel{h * r.Vr};
        std::vector<bool> is_block{false};
        std::vector<int64_t> expert_numel;
        for (int64_t l = 0; l < L; ++l) {
            const bool moe = is_moe_layer(in, l);
            numel.push_back(moe ? 4 * h * h / tp + 3 * h / tp + 5 * h + h * in.moe_experts
                                : 12 * h * h / tp + 7 * h / tp + 6 * h);
            is_block.push_back(true);
            if (moe) expert_numel.push_back((in.moe_experts / r.ep) * (8 * h * h / tp + 4 * h / tp + h));
        }
        numel.push_back(2 * h);
        is_block.push_back(false);
        const int emb = 0, fin = int(L) + 1;
        const bool full = in.recompute == "full";
        std::vector<UnitUse> uses = {{emb, true, true}, {emb, false, true}};
        std::vector<UnitUse> expert_uses;
        for (int l = 0, x = 0; l < int(L); ++l) {
            uses.push_back({l + 1, true, true});
            uses.push_back({l + 1, false, true});
            if (is_moe_layer(in, l)) expert_uses.insert(expert_uses.end(), {{x, true, true}, {x++, false, true}});
        }
        uses.insert(uses.end(), {{fin, true, true}, {emb, true, true}, {emb, false, true}, {fin, false, true},
                                 {fin, true, false}, {emb, true, false}, {emb, false, false}, {fin, false, false}});
        for (int l = int(L) - 1, x = int(expert_numel.size()) - 1; l >= 0; --l) {
            uses.push_back({l + 1, true, false});
            uses.push_back({l + 1, false, false});
            if (is_moe_layer(in, l)) {
                const int times = full ? 2 : 1;  // full recomputation runs the block's forward again first
                for (int t = 0; t < times; ++t) expert_uses.insert(expert_uses.end(), {{x, true, false}, {x, false, false}});
                --x;
            }
        }
        // The micro-batches of a step one after another: a bucket prefetched at the end of one backward and never
        // released is still held when the next forward needs it.
        auto repeated = [&](const std::vector<UnitUse>& one) {
            std::vector<UnitUse> all;
            for (int64_t k = 0; k < in.grad_accum; ++k) all.insert(all.end(), one.begin(), one.end());
            return all;
        };
        const double gathered =
            double(zero3_gathered_elements(numel, is_block, in.bucket_mb, e, repeated(uses))) * double(e);
        p.comm_bytes[1] += int64_t(gathered * ring);
        const std::vector<bool> no_blocks(expert_numel.size(), false);
        const double expert_gathered =
            double(zero3_gathered_elements(expert_numel, no_blocks, in.bucket_mb, e, repeated(expert_uses))) * double(e);
        p.comm_bytes[7] += int64_t(expert_gathered * (edp > 1 ? double(edp - 1) / double(edp) : 0.0));
    }
    const double expert_ring = edp > 1 ? double(edp - 1) / double(edp) : 0.0;  // edp: the experts' copies
    p.comm_bytes[7] += int64_t(dp_collectives * grad_bytes_per_param * double(nx) * expert_ring);
    // (The loss and the MoE routing statistics are summed after the step's span, outside these figures.)
    // pp: one (R, h) activation per micro-batch per boundary each way; interleaving multiplies the boundaries.
    const int64_t boundaries = (first ? 0 : 1) + (last ? 0 : 1);
    p.comm_bytes[2] += in.pp > 1 ? in.grad_accum * boundaries * e * r.R * h * in.pp_chunks : 0;
    // tp: the engine's collectives; the replicated parameters' gradients (LayerNorms, row-parallel biases) that
    // sequence parallelism all-reduces are 6h per block and 2h for the final norm (a ZeRO shard holds 1/dp).
    const int64_t grad_e = in.bf16 && !in.fp32_grad_accum ? 2 : 4;
    const int64_t replicated = ((Ls - Lm) * 6 * h + Lm * 5 * h + (last ? 2 * h : 0)) * grad_e / (in.zero >= 1 ? dp : 1);
    p.tp_collectives = tp_collectives(in, e, replicated, first, last);
    double tp_sent = 0;
    for (const PredictedCollective& c : p.tp_collectives) tp_sent += double(c.count) * bytes_sent(c.op, double(c.bytes), int(tp));
    p.comm_bytes[3] = int64_t(std::llround(tp_sent));
    // cp: the ring's transfers.
    p.cp_collectives = cp_collectives(in, e);
    for (const PredictedCollective& c : p.cp_collectives)
        p.comm_bytes[4] += int64_t(std::llround(c.op == OpClass::send ? double(c.count * c.bytes)
                                                                      : double(c.count) * bytes_sent(c.op, double(c.bytes), r.cp)));
    // ep: the all-to-alls, and the textbook's 4 of K b s h (ep - 1)/ep per MoE block per micro-batch.
    p.ep_collectives = ep_collectives(in, e);
    for (const PredictedCollective& c : p.ep_collectives) p.comm_bytes[5] += c.count * c.bytes;
    if (r.ep > 1)
        p.ep_comm_bytes_formula = 4 * Lm * in.grad_accum * in.moe_topk * r.N * h * e * (r.ep - 1) / r.ep;
    // The tied embedding's gradient summed between the first and the last stage; the gradient norm's scalar.
    if (in.pp > 1 && (first || last)) p.comm_bytes[6] = int64_t(h * r.Vr * grad_e / (in.zero >= 1 ? dp : 1));
    const int64_t world = int64_t(in.dp) * in.pp * tp * in.cp;  // ep shares the dp ranks
    if (world > 1) p.comm_bytes[0] = int64_t(2.0 * 8.0 * double(world - 1) / double(world));
    p.dp_comm_bytes = p.comm_bytes[1];
    p.pp_comm_bytes = p.comm_bytes[2];
    // The textbook (docs/formulas.md): 2 all-reduces of sbh per block in forward and 2 in backward, 2(tp-1)/tp each.
    p.tp_comm_bytes_formula = tp > 1 ? int64_t(4.0 * double(Ls) * double(in.grad_accum) * double(r.N * h * e) * 2.0 *
                                               double(tp - 1) / double(tp))
                                     : 0;

    const double pp = double(in.pp);
    if (in.pp <= 1) {
        p.bubble_theory = 0;
        p.bubble_formula = "no pipeline";
    } else if (in.pp_schedule == "interleaved") {
        p.bubble_theory = (pp - 1) / (double(in.pp_chunks) * m);
        p.bubble_formula = "(pp - 1) / (v m)";
    } else if (in.pp_schedule == "zb1") {
        p.bubble_theory = (pp - 1) / (3.0 * m);
        p.bubble_formula = "about (pp - 1) / (3 m) (ZB-H1)";
    } else {
        p.bubble_theory = (pp - 1) / m;
        p.bubble_formula = "(pp - 1) / m";
    }
    return p;
}

std::string format_prediction(const PredictInput& in, const Prediction& p) {
    std::string s;
    if (in.moe_experts > 0)
        s += fmt::format("Model: h {} v {} L {} heads {} seq {}, every {} block(s) an MoE block of E {} experts, K {} "
                         "per token: N = h*v + L_dense*(12h^2 + 13h) + L_moe*(4h^2 + 8h + hE + E(8h^2 + 5h)) + 2h = {} "
                         "parameters, {} active per token (K experts instead of E)\n",
                         in.hidden, in.vocab, in.layers, in.heads, in.seq, in.moe_every, in.moe_experts, in.moe_topk,
                         p.params, p.active_params);
    else
        s += fmt::format("Model: h {} v {} L {} heads {} seq {}: N = h*v + L*(12h^2 + 13h) + 2h = {} parameters\n",
                         in.hidden, in.vocab, in.layers, in.heads, in.seq, p.params);
    s += fmt::format("Layout: dp {} pp {} tp {}{} cp {}{} ep {}, ZeRO-{}, {}, micro-batch {} x {} tokens, {} "
                     "micro-batches per step, recompute {}\n",
                     in.dp, in.pp, in.tp, in.sp && in.tp > 1 ? " (sequence parallel)" : "", in.cp,
                     in.cp > 1 ? " (" + in.cp_balance + ")" : std::string(), in.ep, in.zero,
                     in.bf16 ? "bf16 mixed precision" : "fp32", in.micro_batch, in.seq, in.grad_accum, in.recompute);
    if (in.pp > 1) s += fmt::format("Pipeline stage {} of {} ({} schedule)\n", in.stage, in.pp, in.pp_schedule);
    if (in.pp > 1 || in.tp > 1 || in.ep > 1)
        s += fmt::format("Parameters on the rank: {}{}{}\n", p.params_on_rank,
                         in.tp > 1 ? " (N_tp = h*ceil(v/tp) + L*(12h^2/tp + 7h/tp + 6h) + 2h, over its stage's layers)" : "",
                         in.moe_experts > 0 ? fmt::format(", of which its {} of {} experts per MoE block: {}",
                                                          in.moe_experts / std::max(1, in.ep), in.moe_experts,
                                                          p.expert_params_on_rank)
                                            : std::string());
    s += fmt::format("\nMemory per rank: {:>12}   {:>12}\n", "predicted", "formula");
    for (int c = 0; c < kMemCategoryCount; ++c)
        s += fmt::format("  {:<16} {:>12}   {:>12}\n", kMemCategoryNames[c],
                         p.memory[size_t(c)] ? format_bytes(*p.memory[size_t(c)]) : std::string("not modelled"),
                         p.memory_formula[size_t(c)] ? format_bytes(*p.memory_formula[size_t(c)]) : std::string("-"));
    s += fmt::format("  {:<16} {:>12}   {:>12}   (sums of the categories' peaks; the runtime, libraries and "
                     "communication buffers come on top: measure them with a run)\n",
                     "total", format_bytes(p.memory_total()), format_bytes(p.memory_formula_total()));
    s += fmt::format("  activations per {}block per micro-batch: {} ({} micro-batch(es) in flight); the textbook's "
                     "{} (formula: {})\n",
                     in.moe_experts > 0 ? "dense " : "", format_bytes(p.activations_per_layer), p.micro_batches_in_flight,
                     format_bytes(p.activations_per_layer_formula), p.activations_formula);
    if (in.moe_experts > 0)
        s += fmt::format("  activations per MoE block per micro-batch: {}, with {} expert rows as if routing were uniform "
                         "(measured rows follow the router)\n",
                         format_bytes(p.activations_per_moe_layer), p.moe_rows_per_layer);    s += fmt::format("\nCompute: {:.1f} MFLOP per token (6N + 12*L*h*s{}), {} tokens per step, {:.2f} TFLOP per step\n",
                     p.flops_per_token / 1e6, in.moe_experts > 0 ? ", N the active parameters" : "", p.tokens_per_step, p.flops_per_token * double(p.tokens_per_step) / 1e12);
    s += fmt::format("Communication sent per rank per step (predicted, ring algorithms): data parallel {}, pipeline {}, "
                     "tensor parallel {}, context parallel {}{}\n",
                     format_bytes(p.comm_bytes[1]), format_bytes(p.comm_bytes[2]), format_bytes(p.comm_bytes[3]),
                     format_bytes(p.comm_bytes[4]),
                     in.ep > 1 ? fmt::format(", expert parallel {} (uniform routing; the textbook's 4 all-to-alls of "
                                             "K*b*s*h*(ep-1)/ep per MoE block: {}), experts' gradients {}",
                                             format_bytes(p.comm_bytes[5]), format_bytes(p.ep_comm_bytes_formula),
                                             format_bytes(p.comm_bytes[7]))
                               : std::string());
    if (in.tp > 1)
        s += fmt::format("  tensor parallel by the textbook (4 all-reduces of s*b*h per block per micro-batch): {}; "
                         "the engine adds the embedding, the head, the vocabulary-parallel loss{}\n",
                         format_bytes(p.tp_comm_bytes_formula),
                         in.sp ? ", the re-gathered LayerNorm outputs and the replicated gradients" : "");
    s += fmt::format("Pipeline bubble (predicted): {:.3f} = {}", p.bubble_theory, p.bubble_formula);
    if (in.pp > 1) s += fmt::format("; {:.3f} on this stage by simulating the schedule", p.bubble_simulated);
    s += "\n";
    return s;
}

nlohmann::json prediction_json(const PredictInput& in, const Prediction& p) {
    nlohmann::json mem = nlohmann::json::object(), formula = nlohmann::json::object();
    for (int c = 0; c < kMemCategoryCount; ++c) {
        mem[std::string(kMemCategoryNames[c])] = p.memory[size_t(c)] ? nlohmann::json(*p.memory[size_t(c)]) : nlohmann::json();
        formula[std::string(kMemCategoryNames[c])] =
            p.memory_formula[size_t(c)] ? nlohmann::json(*p.memory_formula[size_t(c)]) : nlohmann::json();
    }
    nlohmann::json comm = nlohmann::json::object();
    for (int g = 0; g < kGroupCount; ++g) comm[std::string(kGroupNames[g])] = p.comm_bytes[size_t(g)];
    auto list = [](const std::vector<PredictedCollective>& v) {
        nlohmann::json out = nlohmann::json::array();
        for (const PredictedCollective& c : v)
            out.push_back({{"what", c.what}, {"op", std::string(kOpClassNames[size_t(c.op)])}, {"bytes", c.bytes},
                           {"count", c.count}});
        return out;
    };
    const nlohmann::json tp = list(p.tp_collectives);
    return {{"params", p.params},
            {"active_params", p.active_params},
            {"params_on_rank", p.params_on_rank},
            {"expert_params_on_rank", p.expert_params_on_rank},
            {"activations_per_moe_layer_bytes", p.activations_per_moe_layer},
            {"moe_rows_per_layer", p.moe_rows_per_layer},
            {"ep_collectives_per_step", list(p.ep_collectives)},
            {"ep_comm_bytes_per_step_formula", p.ep_comm_bytes_formula},
            {"comm_bytes_per_step", comm},
            {"tp_collectives_per_step", tp},
            {"cp_collectives_per_step", list(p.cp_collectives)},
            {"tp_comm_bytes_per_step_formula", p.tp_comm_bytes_formula},
            {"activations_per_layer_formula_bytes", p.activations_per_layer_formula},
            {"activations_per_layer_formula", p.activations_formula},
            {"memory_bytes", mem},
            {"memory_formula_bytes", formula},
            {"memory_total_bytes", p.memory_total()},
            {"activations_per_layer_bytes", p.activations_per_layer},
            {"micro_batches_in_flight", p.micro_batches_in_flight},
            {"flops_per_token_formula", p.flops_per_token},
            {"tokens_per_step", p.tokens_per_step},
            {"dp_comm_bytes_per_step", p.dp_comm_bytes},
            {"pp_comm_bytes_per_step", p.pp_comm_bytes},
            {"bubble_fraction_formula", p.bubble_theory},
            {"bubble_fraction_predicted", p.bubble_simulated},
            {"bubble_formula", p.bubble_formula}};
}

}  // namespace us::prof
