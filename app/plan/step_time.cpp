#include "app/plan/step_time.h"

#include <algorithm>
#include <cmath>

#include "app/plan/model_shapes.h"
#include "engine/parallel/pipeline_schedule.h"

namespace us::plan {

const Link& group_link(const ClusterDesc& c, int stride, int size) {
    return int64_t(stride) * size <= c.gpus_per_node ? c.intra_node : c.inter_node;
}

namespace {
double hops(int n) { return n > 1 ? std::ceil(std::log2(double(n))) : 0.0; }
}  // namespace

// Ring bandwidth terms (an all-reduce sends 2(n-1)/n of the buffer), tree-like latency (2 log2 n hops).
double all_reduce_s(double bytes, int n, const Link& link) {
    if (n <= 1) return 0;
    return 2.0 * (n - 1) / n * bytes / link.bandwidth + 2.0 * hops(n) * link.latency;
}
double all_gather_s(double bytes, int n, const Link& link) {
    if (n <= 1) return 0;
    return double(n - 1) / n * bytes / link.bandwidth + hops(n) * link.latency;
}
double all_to_all_s(double sent_bytes, int n, const Link& link) {
    if (n <= 1) return 0;
    return sent_bytes / link.bandwidth + double(n - 1) * link.latency;
}
double send_s(double bytes, const Link& link) { return bytes / link.bandwidth + link.latency; }

namespace {

// One micro-batch's forward and backward on a stage, by piece.
struct StageCost {
    double gemm_f = 0, attn_f = 0, other_f = 0;
    double gemm_b = 0, attn_b = 0, other_b = 0;
    double recompute = 0;
    double tp = 0, cp_exposed = 0, cp_hidden = 0, ep = 0, pp = 0;
    double forward() const { return gemm_f + attn_f + other_f + tp_f() + cp_exposed_f() + ep / 2 + pp / 2; }
    double backward() const { return gemm_b + attn_b + other_b + recompute + tp_b() + cp_exposed_b() + ep / 2 + pp / 2; }
    double tp_fraction_forward = 0.5, cp_fraction_forward = 0.3;
    double tp_f() const { return tp * tp_fraction_forward; }
    double tp_b() const { return tp - tp_f(); }
    double cp_exposed_f() const { return cp_exposed * cp_fraction_forward; }
    double cp_exposed_b() const { return cp_exposed - cp_exposed_f(); }
};

double gemm_time(const ClusterDesc& c, const Gemm& g, double peak) {
    return g.count * g.flops() / (peak * c.gemm_eff(g.flops()));
}

StageCost stage_cost(const ModelDesc& m, const ClusterDesc& c, const Layout& l, int stage) {
    const RankShapes r = rank_shapes(m, l, stage);
    const WorkInventory w = work_inventory(m, l, r);
    const double peak = c.peak_flops(l.bf16);
    const double e = l.bf16 ? 2 : 4;
    StageCost s;
    // GEMMs: forward once, backward twice (input and weight gradients) at the same size.
    double layer_gemm = 0, moe_gemm = 0, head_gemm = 0;
    for (const Gemm& g : w.layer_gemms) layer_gemm += gemm_time(c, g, peak);
    for (const Gemm& g : w.moe_layer_gemms) moe_gemm += gemm_time(c, g, peak);
    for (const Gemm& g : w.head_gemms) head_gemm += gemm_time(c, g, peak);
    const double blocks_gemm = double(r.dense_layers) * layer_gemm + double(r.moe_layers) * moe_gemm;
    s.gemm_f = blocks_gemm + (r.last ? head_gemm : 0);
    s.gemm_b = 2 * s.gemm_f;
    // Attention core: backward recomputes the scores when the probabilities were not kept (flash, ring, selective).
    const double attn = double(r.layers) * w.attention_flops / (peak * c.attention_efficiency);
    const bool probs_dropped = l.flash || l.cp > 1 || l.recompute == "selective";
    s.attn_f = attn;
    s.attn_b = attn * (probs_dropped ? 2.5 : 2.0);
    // Memory-bound ops, calibrated forward + backward together: a third in forward.
    const double other = double(r.layers) * (w.norm_elements * c.norm_s + w.elementwise_elements * c.elementwise_s) +
                         (r.first ? w.embedding_elements * c.embedding_s : 0) +
                         (r.last ? w.loss_elements * c.loss_s + w.final_norm_elements * c.norm_s : 0);
    const double overhead = 1.0 + c.host_overhead;
    s.gemm_f *= overhead, s.gemm_b *= overhead, s.attn_f *= overhead, s.attn_b *= overhead;
    s.other_f = other / 3 * overhead;
    s.other_b = 2 * other / 3 * overhead;
    // Recomputation repeats forward work during backward: all of it (full), or the attention core (selective).
    if (l.recompute == "full") s.recompute = s.gemm_f - (r.last ? head_gemm * overhead : 0) + s.attn_f + s.other_f;
    else if (l.recompute == "selective" && !l.flash && l.cp == 1) s.recompute = s.attn_f;
    // Tensor parallelism (docs/formulas.md): per layer 2 all-reduces of T h e in forward and 2 in backward; with
    // sp each an all-gather plus a reduce-scatter, and backward re-gathers the norm outputs (2 more all-gathers).
    // Full recomputation repeats the forward's. All on the critical path.
    if (l.tp > 1) {
        const Link& link = group_link(c, 1, l.tp);
        const double K = double(r.T * m.hidden) * e;
        const double per_layer_f = l.sp ? 2 * (all_gather_s(K, l.tp, link) + all_gather_s(K, l.tp, link))
                                         : 2 * all_reduce_s(K, l.tp, link);
        const double per_layer_b = l.sp ? per_layer_f + 2 * all_gather_s(K, l.tp, link) : per_layer_f;
        const double layers = double(r.layers);
        const double f = layers * per_layer_f + (r.first || r.last ? all_reduce_s(K, l.tp, link) : 0);
        const double b = layers * per_layer_b * 1.0 + (l.recompute == "full" ? layers * per_layer_f : 0);
        s.tp = f + b;
        s.tp_fraction_forward = s.tp > 0 ? f / s.tp : 0.5;
    }
    // Context parallelism: the ring passes each rank's key/value block on cp - 1 times in forward; backward passes
    // them again and cp fp32 gradient blocks. Each transfer overlaps the attention of the block in hand.
    if (l.cp > 1) {
        const Link& link = group_link(c, l.tp, l.cp);
        const double kv = 2.0 * double(r.T) * double(r.qkv_width - r.attn_width) / 2.0;  // k and v widths
        const double f = double(l.cp - 1) * send_s(kv * e, link);
        const double b = double(l.cp - 1) * send_s(kv * e, link) + double(l.cp) * send_s(kv * 4, link);
        const double per_layer_attn_f = w.attention_flops / (peak * c.attention_efficiency);
        const double exposed_f = std::max(0.0, f - per_layer_attn_f), exposed_b = std::max(0.0, b - 2.5 * per_layer_attn_f);
        const double layers = double(r.layers) * (l.recompute == "full" ? 1.0 : 1.0);
        s.cp_exposed = layers * (exposed_f + exposed_b + (l.recompute == "full" ? exposed_f : 0));
        s.cp_hidden = layers * (f + b) - s.cp_exposed;
        s.cp_fraction_forward = exposed_f + exposed_b > 0 ? exposed_f / (exposed_f + exposed_b) : 0.3;
    }
    // Expert parallelism: per MoE layer 4 all-to-alls (dispatch and combine, forward and backward) of the rank's
    // rows, (ep - 1)/ep of them to others; full recomputation repeats the forward's two.
    if (l.ep > 1 && r.moe_layers > 0) {
        const Link& link = group_link(c, l.tp * l.cp * l.pp, l.ep);
        const double sent = double(r.expert_rows) * double(m.hidden) * e * double(l.ep - 1) / l.ep;
        const double passes = 4.0 + (l.recompute == "full" ? 2.0 : 0.0);
        s.ep = double(r.moe_layers) * passes * all_to_all_s(sent, l.ep, link);
    }
    // Pipeline: an activation (R h) to the next stage in forward and its gradient back in backward.
    if (l.pp > 1) {
        const Link& link = group_link(c, l.tp * l.cp, l.pp);
        const double bytes = double(r.R * m.hidden) * e;
        s.pp = double(r.chunks) * ((r.last && r.chunks == 1 ? 0 : 1) + (r.first && r.chunks == 1 ? 0 : 1)) * send_s(bytes, link);
    }
    return s;
}

}  // namespace

StepPieces estimate_step(const ModelDesc& m, const ClusterDesc& c, const Layout& l) {
    // The busiest stage sets the pace: every stage runs the schedule at the slowest stage's costs.
    StageCost worst;
    double worst_total = -1;
    for (int st = 0; st < l.pp; ++st) {
        const StageCost s = stage_cost(m, c, l, st);
        if (s.forward() + s.backward() > worst_total) worst = s, worst_total = s.forward() + s.backward();
    }
    const double mb = l.grad_accum;
    StepPieces p;
    p.forward_s = worst.forward();
    p.backward_s = worst.backward();
    p.gemm_s = mb * (worst.gemm_f + worst.gemm_b);
    p.attention_s = mb * (worst.attn_f + worst.attn_b);
    p.other_ops_s = mb * (worst.other_f + worst.other_b);
    p.recompute_s = mb * worst.recompute;
    p.tp_comm_s = mb * worst.tp;
    p.cp_comm_exposed_s = mb * worst.cp_exposed;
    p.cp_comm_hidden_s = mb * worst.cp_hidden;
    p.ep_comm_s = mb * worst.ep;
    p.pp_comm_s = mb * worst.pp;
    const double busy = mb * (p.forward_s + p.backward_s);
    double makespan = busy;
    if (l.pp > 1) {
        const int V = l.pp_schedule == "interleaved" ? std::max(1, l.pp_chunks) : 1;
        const PipelineShape shape{l.pp, l.grad_accum, V};
        makespan = simulate_schedule(make_schedule(l.pp_schedule, shape), shape, p.forward_s, p.backward_s).makespan;
    }
    p.bubble_s = std::max(0.0, makespan - busy);

    // Data parallelism and ZeRO over the dp x cp ranks holding the same parameters (experts: dp/ep x cp).
    const RankShapes r = rank_shapes(m, l, 0);
    const double e = l.bf16 ? 2 : 4, grad_e = l.bf16 && !l.fp32_grad_accum ? 2 : 4;
    const int n = l.dp * l.cp, nx = (l.dp / l.ep) * l.cp;
    const Link& link = group_link(c, l.tp, l.dp * l.cp);  // cp and dp ranks together (dp stride tp cp pp)
    const Link& dp_link = l.dp > 1 ? group_link(c, l.tp * l.cp * l.pp, l.dp) : link;
    const Link& red = l.cp > 1 && l.dp == 1 ? link : dp_link;
    const double K = double(r.params) * grad_e, Kx = double(r.expert_params) * grad_e;
    const double bucket = std::min(K, l.bucket_mb * 1048576.0);
    double reduce = 0, exposed = 0;
    if (n > 1 || nx > 1) {
        const double last_bucket = l.zero >= 2 ? all_gather_s(bucket, n, red) : all_reduce_s(bucket, n, red);
        if (l.zero <= 1) {
            // ZeRO-0 all-reduces the gradients (ZeRO-1 reduce-scatters them) once, bucket by bucket during the
            // last micro-batch's backward; what does not fit behind it, and the last bucket, is exposed.
            reduce = l.zero == 0 ? all_reduce_s(K, n, red) + all_reduce_s(Kx, nx, red)
                                 : all_gather_s(K, n, red) + all_gather_s(Kx, nx, red);
            const double window = l.overlap ? p.backward_s : 0.0;
            exposed = std::max(reduce - window, l.overlap ? std::min(reduce, last_bucket) : reduce);
        } else {
            // ZeRO-2 and 3 reduce-scatter at every micro-batch, each behind its own backward.
            const double once = all_gather_s(K, n, red) + all_gather_s(Kx, nx, red);
            reduce = mb * once;
            const double window = l.overlap ? p.backward_s : 0.0;
            exposed = mb * std::max(once - window, l.overlap ? std::min(once, last_bucket) : once);
        }
        if (l.zero >= 1) {  // the updated shards gathered back after the optimizer step: exposed
            const double gather = all_gather_s(double(r.params) * e, n, red) + all_gather_s(double(r.expert_params) * e, nx, red);
            reduce += gather;
            exposed += gather;
        }
        if (l.zero >= 3) {  // parameters gathered for every forward and backward, prefetched behind compute
            const double gathers = 2.0 * (all_gather_s(double(r.params) * e, n, red) + all_gather_s(double(r.expert_params) * e, nx, red));
            reduce += mb * gathers;
            exposed += mb * std::max(0.0, gathers - (p.forward_s + p.backward_s));
        }
    }
    p.dp_comm_exposed_s = exposed;
    p.dp_comm_hidden_s = std::max(0.0, reduce - exposed);
    // The optimizer walks the rank's shard of the parameters (ZeRO-1 and up: 1/(dp cp)).
    const double shard = l.zero >= 1 ? double(r.params) / n + double(r.expert_params) / nx : double(r.params + r.expert_params);
    p.optimizer_s = shard * c.optimizer_s * (1.0 + c.host_overhead);
    p.step_s = makespan + p.dp_comm_exposed_s + p.optimizer_s;
    return p;
}

}  // namespace us::plan
