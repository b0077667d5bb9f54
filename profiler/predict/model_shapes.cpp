#include "profiler/predict/model_shapes.h"

#include <cmath>

#include <algorithm>

#include "common/schedule/pipeline_schedule.h"

namespace us::predict {

namespace {

// Bytes one layer keeps from its forward to its backward (docs/planner.md): the generalised form of Korthikanti et
// al. 2022 without dropout masks, with e-byte activations and fp32 norm statistics. `moe`: the MLP replaced by the
// router and the rank's expert rows.
int64_t layer_bytes(const ModelDesc& m, const Layout& l, const RankShapes& r, bool moe, Recompute recompute) {
    const ParallelLayout& p = l.parallel;
    const int64_t e = l.bf16 ? 2 : 4, h = m.hidden;
    if (recompute == Recompute::full) return e * r.R * h;  // the layer's input only
    const int64_t norm_side = 4 * e * r.R * h;             // both norms' inputs and outputs (split by tp only with sp)
    const int64_t stats = (m.rmsnorm ? 4 : 8) * 2 * r.R;
    const int64_t attention = e * r.T * (r.qkv_width + r.attn_width);  // q, k, v and the attention output
    const int64_t mlp_acts = m.swiglu ? 3 : 2;  // GeLU: its input and output; SwiGLU: gate, up and their product
    const int64_t mlp = moe ? 4 * r.T * m.moe_experts + e * r.expert_rows * (h + mlp_acts * r.ffn_width + h)
                            : e * r.T * mlp_acts * r.ffn_width;
    // The attention core: the (b, a/tp, s/cp, s) probabilities, unless they are never stored (flash attention, a
    // cp ring: the fp32 log-sum-exp instead) or recomputed (selective).
    int64_t core = 0;
    if (l.flash || p.cp > 1)
        core = 4 * r.T * r.heads;
    else if (recompute != Recompute::selective)
        core = e * (r.T / std::max<int64_t>(1, m.seq / p.cp)) * r.heads * (m.seq / p.cp) * m.seq;
    return norm_side + stats + attention + mlp + core;
}

}  // namespace

RankShapes rank_shapes(const ModelDesc& m, const Layout& l, int stage) {
    const ParallelLayout& p = l.parallel;
    RankShapes r;
    const int64_t tp = p.tp, h = m.hidden;
    r.stage = stage;
    r.first = stage == 0;
    r.last = stage == p.pp - 1;
    r.chunks = p.virtual_chunks();
    // Stages of equal size; when they cannot be (Llama 3 405B: 126 layers on 16 stages), every stage is taken to
    // hold the busiest one's ceil(L / stages): the first and last give up layers in practice (Dubey et al. 2024).
    const int64_t stages = int64_t(p.pp) * r.chunks, per_chunk = (m.layers + stages - 1) / stages;
    for (int c = 0; c < r.chunks; ++c)
        for (int64_t i = 0; i < per_chunk; ++i) {
            const int64_t layer = std::min(m.layers - 1, (int64_t(c) * p.pp + stage) * per_chunk + i);
            (m.is_moe_layer(layer) ? r.moe_layers : r.dense_layers)++;
        }
    r.layers = r.dense_layers + r.moe_layers;
    r.T = int64_t(l.micro_batch) * m.seq / p.cp;
    r.R = p.sp ? r.T / tp : r.T;
    r.Vr = (m.vocab + tp - 1) / tp;
    // Key/value heads split over tp while there are enough; beyond that each rank keeps one (replicated).
    const int64_t kv_per_rank = std::max<int64_t>(1, m.kv() / tp);
    r.qkv_width = m.attn_width() / tp + 2 * kv_per_rank * m.head_size();
    r.attn_width = m.attn_width() / tp;
    r.ffn_width = m.ffn() / tp;
    r.heads = m.heads / tp;
    r.expert_rows = m.is_moe() ? r.T * m.moe_topk : 0;
    // Parameters: matrices split over tp, norms whole; the token table on the first stage and (untied, or tied with
    // a pipeline: Megatron's copy) the output matrix on the last, both vocabulary-parallel.
    const int64_t norms = 2 * m.norm_params();
    const int64_t attention = (m.attention_params() - (m.biases ? h : 0)) / tp + (m.biases ? h : 0);
    const int64_t mlp = m.mlp_params() / tp;
    r.params = r.dense_layers * (attention + mlp + norms) + r.moe_layers * (attention + norms + h * m.moe_experts);
    r.expert_params = m.is_moe() ? r.moe_layers * (m.moe_experts / p.ep) * mlp : 0;
    if (r.first) r.params += r.Vr * h + (m.embedding_params() - m.vocab * h);
    if (r.last) {
        r.params += m.norm_params();
        if (!m.tied_embeddings || !r.first) r.params += r.Vr * h;
    }
    r.layer_activation_bytes = layer_bytes(m, l, r, false, l.recompute);
    r.moe_layer_activation_bytes = m.is_moe() ? layer_bytes(m, l, r, true, l.recompute) : 0;
    r.layer_activation_bytes_no_recompute = layer_bytes(m, l, r, r.moe_layers > 0, Recompute::none);
    return r;
}

RankShapes chunk_shapes(const ModelDesc& m, const Layout& l, int stage, int chunk) {
    const ParallelLayout& p = l.parallel;
    RankShapes r = rank_shapes(m, l, stage);
    const int64_t stages = int64_t(p.pp) * r.chunks, per_chunk = (m.layers + stages - 1) / stages;
    r.dense_layers = r.moe_layers = 0;
    for (int64_t i = 0; i < per_chunk; ++i) {
        const int64_t layer = std::min(m.layers - 1, (int64_t(chunk) * p.pp + stage) * per_chunk + i);
        (m.is_moe_layer(layer) ? r.moe_layers : r.dense_layers)++;
    }
    r.layers = r.dense_layers + r.moe_layers;
    r.first = chunk == 0 && stage == 0;
    r.last = chunk == r.chunks - 1 && stage == p.pp - 1;
    r.chunks = 1;
    return r;
}

std::vector<StageInFlight> stages_in_flight(const Layout& l) {
    const ParallelLayout& p = l.parallel;
    std::vector<StageInFlight> out(size_t(std::max(1, p.pp)));
    if (p.pp <= 1) {
        // The engine runs the schedule asked for at pp 1 too (engine/train/trainer.cpp): afab holds every
        // micro-batch's activations (all forwards, then all backwards); 1f1b and zb1 one at a time.
        const int held = p.pp_schedule == PipelineSchedule::afab ? std::max(1, l.grad_accum) : 1;
        out[0] = {held, held, held};
        return out;
    }
    const int V = p.virtual_chunks();
    const PipelineShape shape{p.pp, l.grad_accum, V};
    const Simulation sim = simulate_schedule(make_schedule(p.pp_schedule, shape), shape);
    for (int s = 0; s < p.pp; ++s) {
        out[size_t(s)].micro_batches = sim.max_in_flight[size_t(s)];
        out[size_t(s)].chunks = sim.max_chunks_in_flight[size_t(s)];
    }
    // The head lives from the last stage's forward of a micro-batch to its backward: 1 with 1F1B-like schedules
    // (the backward follows at once), every micro-batch with AFAB.
    out.back().last_chunk_micro_batches = p.pp_schedule == PipelineSchedule::afab ? l.grad_accum : 1;
    return out;
}

WorkInventory work_inventory(const ModelDesc& m, const Layout& l, const RankShapes& r) {
    const ParallelLayout& p = l.parallel;
    WorkInventory w;
    const int64_t h = m.hidden;
    const int64_t up = (m.swiglu ? 2 : 1) * r.ffn_width;
    w.layer_gemms = {{r.T, r.qkv_width, h}, {r.T, h, r.attn_width}, {r.T, up, h}, {r.T, h, r.ffn_width}};
    if (m.is_moe()) {
        // Uniform routing: the rank's E/ep experts each see X ep / E rows (its tokens' choices and its peers').
        const double local = double(m.moe_experts / p.ep);
        // Under expert parallelism the busiest rank sets the pace (its peers wait in the combine all-to-all): its
        // rows are the uniform share times the router's load on it (Layout::moe_load; uniform when not given).
        const double load = p.ep > 1 ? l.moe_load_or_uniform() : 1.0;
        const int64_t rows =
            std::max<int64_t>(1, int64_t(std::llround(load * double(r.expert_rows * p.ep / m.moe_experts))));
        w.moe_layer_gemms = {{r.T, r.qkv_width, h},
                             {r.T, h, r.attn_width},
                             {r.T, m.moe_experts, h},
                             {rows, up, h, local},
                             {rows, h, r.ffn_width, local}};
    }
    w.head_gemms = {{r.T, r.Vr, h}};
    // The attention core's two products per query over every key (the engine counts the whole square), and the
    // share a causal kernel that skips the masked keys executes: s (s + 1) / 2 visible pairs of the s^2.
    w.attention_flops =
        4.0 * double(l.micro_batch) * double(r.heads) * double(m.seq / p.cp) * double(m.seq) * double(m.head_size());
    w.attention_visible = (double(m.seq) + 1) / (2.0 * double(m.seq));
    w.norm_elements = 2.0 * double(r.R * h);
    // Biases of the four linears (when present), the activation function over the MLP's width, two residual adds.
    w.elementwise_elements = double(r.T) * double(r.qkv_width + r.attn_width + 2 * up) + 2.0 * double(r.R * h);
    if (m.is_moe()) {
        const double load = p.ep > 1 ? l.moe_load_or_uniform() : 1.0;
        // The router's scores (T E) and three copies of the expert rows (dispatch, combine, weighting); and the
        // experts' biases and activation run over the rows the rank's experts get (its load times T top-k), not the
        // T rows a dense MLP's do, which elementwise_elements already counts.
        const double rows = double(r.expert_rows) * load;
        w.moe_elementwise_elements =
            double(r.T * m.moe_experts) + 3.0 * double(h) * rows + std::max(0.0, rows - double(r.T)) * 2.0 * double(up);
    }
    w.embedding_elements = double(r.T * h);
    w.loss_elements = double(r.T * r.Vr);
    w.final_norm_elements = double(r.R * h);
    return w;
}

double executed_attention_flops(const WorkInventory& w, const Layout& l, bool naive_skips_masked) {
    const bool skips = l.flash || l.parallel.cp > 1 || naive_skips_masked;
    return w.attention_flops * (skips ? w.attention_visible : 1.0);
}

double executed_over_recorded_attention(const Layout& l, int64_t seq, bool naive_skips_masked) {
    const ParallelLayout& p = l.parallel;
    const double s = double(seq);
    if (l.flash || p.cp > 1) {
        // n chunks per sequence (one per rank, two with zigzag; flash alone: one): the engine records the n (n + 1)
        // / 2 chunk pairs at or below the diagonal, each (s/n)^2, where s (s + 1) / 2 pairs are visible.
        const double n = double(p.cp) * (p.cp > 1 && p.cp_balance == CpBalance::zigzag ? 2 : 1);
        return (s + 1) * n / (s * (n + 1));
    }
    return naive_skips_masked ? (s + 1) / (2 * s) : 1.0;
}

}  // namespace us::predict
