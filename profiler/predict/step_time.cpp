#include "profiler/predict/step_time.h"

#include <algorithm>
#include <cmath>

#include "profiler/predict/model_shapes.h"
#include "profiler/predict/pipeline_sim.h"
#include "profiler/predict/shared_work.h"
#include "common/schedule/pipeline_schedule.h"

namespace us::predict {

const Link& group_link(const ClusterDesc& c, int stride, int size) {
    if (size <= 1) return c.intra_node;
    if (c.placement == "cyclic") return c.nodes <= 1 || stride % c.nodes == 0 ? c.intra_node : c.inter_node;
    return int64_t(stride) * size <= c.gpus_per_node ? c.intra_node : c.inter_node;
}

int link_level(const ClusterDesc& c, const Link& link) { return &link == &c.inter_node ? kLinkInter : kLinkIntra; }

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

double gemm_time(const ClusterDesc& c, const Gemm& g, double peak) {
    return g.count * g.flops() / (peak * c.gemm_eff(g.flops()));
}

}  // namespace

// The cost of the layers and ends (embedding on the first, head on the last) that `r` holds: a whole stage, or one
// chunk of an interleaved stage (chunk_shapes).
StageCost stage_cost(const ModelDesc& m, const ClusterDesc& c, const Layout& l, const RankShapes& r,
                     const BackwardLinkShare& share) {
    const ParallelLayout& p = l.parallel;
    // The backward's blocking transfers on the shared level take `share.factor` times as long.
    auto in_backward = [&](const Link& link) { return link_level(c, link) == share.level ? share.factor : 1.0; };
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
    s.gemm_w = s.gemm_f;
    // Attention core: backward is four products against forward's two (2x). The blockwise kernels (flash, the cp
    // ring) also rebuild the scores from q and k inside their backward (2.5x). The naive kernel under selective
    // recomputation rebuilds them too (QK^T and the softmax: half the forward's products), a recomputation piece
    // of its own below, not a second charge here (engine/backend/cpu/attention.cpp). The FLOPs are those the kernel
    // executes (executed_attention_flops): a causal blockwise kernel skips the masked half of the square.
    // A blockwise kernel runs short blocks less efficiently (the cluster file's attention_length_efficiency, keyed on
    // the keys of one call: the sequence, or the ring's s/cp block).
    const double core_flops = executed_attention_flops(w, l, c.naive_attention_skips_masked);
    const bool blockwise = l.flash || p.cp > 1;
    const double attention_eff =
        c.attention_efficiency * (blockwise ? c.attention_length_factor(double(m.seq) / p.cp) : 1.0);
    const double attn = double(r.layers) * core_flops / (peak * attention_eff);
    s.attn_f = attn;
    s.attn_b = attn * (blockwise ? 2.5 : 2.0);
    // Memory-bound ops, calibrated forward + backward together: a third in forward.
    const double other = double(r.layers) * (w.norm_elements * c.norm_s + w.elementwise_elements * c.elementwise_s) +
                         double(r.moe_layers) * w.moe_elementwise_elements * c.elementwise_s +
                         (r.first ? w.embedding_elements * c.embedding_s : 0) +
                         (r.last ? w.loss_elements * c.loss_s + w.final_norm_elements * c.norm_s : 0);
    const double overhead = 1.0 + c.host_overhead;
    s.gemm_f *= overhead, s.gemm_b *= overhead, s.gemm_w *= overhead, s.attn_f *= overhead, s.attn_b *= overhead;
    s.other_f = other / 3 * overhead;
    s.other_b = 2 * other / 3 * overhead;
    // Recomputation repeats forward work during backward: all of the blocks' (full), or the scores and softmax of
    // the naive attention core (selective: half its forward products).
    if (l.recompute == Recompute::full)
        s.recompute = s.gemm_f - (r.last ? head_gemm * overhead : 0) + s.attn_f + s.other_f;
    else if (l.recompute == Recompute::selective && !blockwise)
        s.recompute = 0.5 * s.attn_f;
    // Tensor parallelism (docs/formulas.md): per layer 2 all-reduces of T h e in forward and 2 in backward; with
    // sp each an all-gather plus a reduce-scatter, and backward re-gathers the norm outputs (2 more all-gathers).
    // Full recomputation repeats the forward's. All on the critical path.
    if (p.tp > 1) {
        const Link& link = group_link(c, 1, p.tp);
        const double K = double(r.T * m.hidden) * e;
        const double per_layer_f =
            p.sp ? 2 * (all_gather_s(K, p.tp, link) + all_gather_s(K, p.tp, link)) : 2 * all_reduce_s(K, p.tp, link);
        const double per_layer_b = p.sp ? per_layer_f + 2 * all_gather_s(K, p.tp, link) : per_layer_f;
        const double layers = double(r.layers);
        s.tp_vocab = r.first || r.last ? all_reduce_s(K, p.tp, link) : 0;
        s.tp_f = layers * per_layer_f + s.tp_vocab;
        s.tp_b =
            in_backward(link) * (layers * per_layer_b + (l.recompute == Recompute::full ? layers * per_layer_f : 0));
        s.link[size_t(link_level(c, link))] += s.tp_f + s.tp_b;
    }
    // Context parallelism (engine/model/context_parallel.cpp): the ring takes cp steps per layer, each step's
    // attention being 1/cp of the layer's (zigzag balances the causal work). Forward: a key/value block travels
    // behind each of the first cp - 1 steps. Backward: the key/value block behind step i < cp - 1 and the fp32
    // gradient block of step i - 1 behind step i; the last step's gradient block has nothing left to hide behind
    // and is exposed whole. Whatever a transfer takes beyond its step's attention is exposed.
    // The all-gather (Llama 3's, context_parallel_allgather.cpp): per layer every rank's key/value block gathered
    // before the attention in forward and again in backward, the cp fp32 gradient blocks reduce-scattered after the
    // backward, none of it overlapped.
    if (p.cp > 1) {
        const Link& link = group_link(c, p.tp, p.cp);
        const double kv_elements = double(r.T) * double(r.qkv_width - r.attn_width);  // a rank's k and v
        const double layers = double(r.layers);
        if (p.cp_comm == CpComm::allgather) {
            const double gather = all_gather_s(double(p.cp) * kv_elements * e, p.cp, link);
            const double scatter = all_gather_s(double(p.cp) * kv_elements * 4, p.cp, link);
            s.cp_exposed_f = layers * gather;
            s.cp_exposed_b =
                in_backward(link) * layers * (gather + scatter + (l.recompute == Recompute::full ? gather : 0));
            s.cp_scatter = layers * scatter;
        } else {
            const double kv = send_s(kv_elements * e, link), g = send_s(kv_elements * 4, link);
            const double step_f = core_flops / (peak * attention_eff) * overhead / p.cp;
            const double step_b = step_f * 2.5;
            const double exposed_f = double(p.cp - 1) * std::max(0.0, kv - step_f);
            auto backward_exposed = [&](double kv_b, double g_b) {
                double x = std::max(0.0, kv_b - step_b) + std::max(0.0, g_b - step_b) + g_b;
                if (p.cp > 2) x += double(p.cp - 2) * std::max(0.0, kv_b + g_b - step_b);
                return x;
            };
            const double exposed_b = backward_exposed(kv, g);
            const double total = double(p.cp - 1) * kv + (double(p.cp - 1) * kv + double(p.cp) * g);
            s.cp_exposed_f = layers * exposed_f;
            // sharing the link lengthens what is exposed; what hides stays counted as alone (the link's bytes)
            const double f = in_backward(link);
            const double exposed_f_again = double(p.cp - 1) * std::max(0.0, f * kv - step_f);
            s.cp_exposed_b =
                layers * (backward_exposed(f * kv, f * g) + (l.recompute == Recompute::full ? exposed_f_again : 0));
            s.cp_hidden = layers * (total - exposed_f - exposed_b);
            // The attention beside the hidden transfers runs slower (their kernels share the SMs and memory; over
            // TCP the kernel's network work shares the cores).
            const double hidden_f = layers * (double(p.cp - 1) * kv - exposed_f);
            const double slowdown = c.overlap_slowdown_on(link);
            s.contention_f = slowdown * hidden_f;
            s.contention_b = slowdown * std::max(0.0, s.cp_hidden - hidden_f);
        }
        s.link[size_t(link_level(c, link))] += s.cp_exposed_f + s.cp_exposed_b + s.cp_hidden;
    }
    // Expert parallelism: per MoE layer 4 all-to-alls (dispatch and combine, forward and backward) of the rank's
    // rows, (ep - 1)/ep of them to others; full recomputation repeats the forward's two.
    if (p.ep > 1 && r.moe_layers > 0) {
        const Link& link = group_link(c, p.tp * p.cp * p.pp, p.ep);
        // The busiest rank receives its load's share of rows (Layout::moe_load) and sends its own tokens' choices;
        // the exchange ends when the larger of the two has crossed.
        const double sent = double(r.expert_rows) * double(m.hidden) * e * double(p.ep - 1) / p.ep *
                            std::max(1.0, l.moe_load_or_uniform());
        const double one = double(r.moe_layers) * all_to_all_s(sent, p.ep, link);
        s.ep_f = 2 * one;
        s.ep_b = in_backward(link) * (2.0 + (l.recompute == Recompute::full ? 2.0 : 0.0)) * one;
        s.link[size_t(link_level(c, link))] += s.ep_f + s.ep_b;
    }
    // Pipeline: an activation (R h) arrives from the previous virtual stage in forward and its gradient from the
    // next in backward (the simulation puts them on the schedule's edges).
    if (p.pp > 1) {
        const Link& link = group_link(c, p.tp * p.cp, p.pp);
        s.pp = double((r.first ? 0 : 1) + (r.last ? 0 : 1)) * send_s(double(r.R * m.hidden) * e, link);
        s.link[size_t(link_level(c, link))] += s.pp;
    }
    return s;
}

DpCost dp_cost(const ModelDesc& m, const ClusterDesc& c, const Layout& l, const RankShapes& r, const StageCost& one) {
    const ParallelLayout& p = l.parallel;
    DpCost d;
    const double mb = l.grad_accum;
    const double e = l.bf16 ? 2 : 4, grad_e = l.bf16 && !l.fp32_grad_accum ? 2 : 4;
    const int n = p.dp * p.cp, nx = (p.dp / p.ep) * p.cp;
    const Link& link = group_link(c, p.tp, p.dp * p.cp);  // cp and dp ranks together (dp stride tp cp pp)
    const Link& dp_link = p.dp > 1 ? group_link(c, p.tp * p.cp * p.pp, p.dp) : link;
    const Link& reduce_link = p.cp > 1 && p.dp == 1 ? link : dp_link;
    // Gradient buckets across nodes at the bandwidth measured for them, where it was (ClusterDesc).
    Link red = reduce_link;
    if (&reduce_link == &c.inter_node && c.inter_node_bucket_bandwidth > 0)
        red.bandwidth = c.inter_node_bucket_bandwidth;
    // The gradients as reduced: ZeRO-0 and 1 reduce the accumulated ones (fp32 with --fp32-grad-accum), ZeRO-2 and 3
    // each micro-batch's, in the compute dtype (engine/parallel/zero_state.cpp).
    const double reduced_e = p.zero >= 2 ? e : grad_e;
    const double K = double(r.params) * reduced_e, Kx = double(r.expert_params) * reduced_e;
    const double bucket = std::min(K, p.bucket_mb * 1048576.0);
    double reduce = 0, exposed = 0;
    // Communication hides behind compute only (a collective on the critical path, tp's or ep's, leaves the compute
    // stream idle, and the link it uses may be this one): the windows are the compute of the passes it overlaps.
    const double compute_f = one.gemm_f + one.attn_f + one.other_f;
    const double compute_b = one.gemm_b + one.attn_b + one.other_b + one.recompute;
    if (n > 1 || nx > 1) {
        const double last_bucket = p.zero >= 2 ? all_gather_s(bucket, n, red) : all_reduce_s(bucket, n, red);
        // A reduction behind a backward of compute `window`: what does not fit, and the last bucket, is exposed.
        auto exposed_behind = [&](double traffic, double window) {
            return p.overlap ? std::max(traffic - window, std::min(traffic, last_bucket)) : traffic;
        };
        if (p.zero <= 1) {
            // ZeRO-0 all-reduces the gradients (ZeRO-1 reduce-scatters them) once, bucket by bucket during the
            // last micro-batch's backward.
            reduce = p.zero == 0 ? all_reduce_s(K, n, red) + all_reduce_s(Kx, nx, red)
                                 : all_gather_s(K, n, red) + all_gather_s(Kx, nx, red);
            exposed = exposed_behind(reduce, compute_b);
            d.backward_traffic = reduce;
        } else if (p.zero == 2) {
            // ZeRO-2 reduce-scatters at every micro-batch, each behind its own backward.
            const double once = all_gather_s(K, n, red) + all_gather_s(Kx, nx, red);
            reduce = mb * once;
            d.backward_traffic = reduce;
            exposed = mb * exposed_behind(once, compute_b);
        } else {
            // ZeRO-3 (engine/parallel/zero_state.cpp) keeps only its shard: every forward and backward gathers each
            // bucket, prefetching the next block's behind the one in hand, and every backward reduce-scatters the
            // gradients too. Nothing is in hand before the first: per pass, the embedding (first in forward, the
            // tied head first in backward, neither prefetched) and the first block's bucket wait whole, as does the
            // last gradient bucket. The rest shares one link and one window per pass: the forward's gathers behind
            // the forward's compute, the backward's gathers and reduce-scatter together behind the backward's.
            const double once = all_gather_s(K, n, red) + all_gather_s(Kx, nx, red);
            const double layer_params =
                r.layers > 0 ? double(r.params - (r.first ? r.Vr * m.hidden : 0)) / double(r.layers) : 0;
            const double block_bucket =
                std::max(layer_params * e, std::min(p.bucket_mb * 1048576.0, layer_params * e * double(r.layers)));
            const double all =
                all_gather_s(double(r.params) * e, n, red) + all_gather_s(double(r.expert_params) * e, nx, red);
            const double first =
                std::min(all, (r.first || r.last ? all_gather_s(double(r.Vr * m.hidden) * e, n, red) : 0) +
                                  all_gather_s(block_bucket, n, red));
            const double hidden_f = std::min(all - first, compute_f);
            const double hideable_b = (all - first) + (p.overlap ? std::max(0.0, once - last_bucket) : 0.0);
            const double hidden_b = std::min(hideable_b, compute_b);
            reduce = mb * (2 * all + once);
            d.backward_traffic = mb * (all + once);
            exposed = reduce - mb * (hidden_f + hidden_b);
        }
        if (p.zero == 1 || p.zero == 2) {  // the updated shards gathered back after the optimizer step: exposed
            const double gather =
                all_gather_s(double(r.params) * e, n, red) + all_gather_s(double(r.expert_params) * e, nx, red);
            reduce += gather;
            exposed += gather;
        }
    }
    // A tied embedding split over a pipeline: the first and last stages all-reduce its gradient after the last
    // backward (the engine's embedding group), exposed.
    if (p.pp > 1 && m.tied_embeddings && (r.first || r.last)) {
        const double sync =
            all_reduce_s(double(r.Vr * m.hidden) * grad_e, 2, group_link(c, p.tp * p.cp * (p.pp - 1), 2));
        reduce += sync;
        exposed += sync;
    }
    if (!p.overlap) d.backward_traffic = 0;  // the buckets flow after the backward
    d.exposed = exposed;
    d.hidden = std::max(0.0, reduce - exposed);
    d.link_level = link_level(c, reduce_link);
    // The optimizer walks the rank's shard of the parameters (ZeRO-1 and up: 1/(dp cp)).
    const double shard =
        p.zero >= 1 ? double(r.params) / n + double(r.expert_params) / nx : double(r.params + r.expert_params);
    d.optimizer = shard * c.optimizer_s * (1.0 + c.host_overhead);
    return d;
}

StepModel model_step(const ModelDesc& m, const ClusterDesc& c, const Layout& l, SharedWork* shared) {
    const ParallelLayout& p = l.parallel;
    // Every rank of a stage and every chunk of it at its own cost; with a pipeline the schedule is simulated with
    // those costs, and the stage that ends last (its pipeline work, then the slowdown of the compute its hidden
    // data-parallel traffic ran beside, its exposed data-parallel communication and its optimizer) sets the step.
    StepModel sm;
    sm.chunks = p.virtual_chunks();
    const int V = sm.chunks;
    const double mb = l.grad_accum;
    sm.stage.assign(size_t(p.pp), StageCost{});
    sm.chunk.assign(size_t(p.pp * V), StageCost{});
    std::vector<VirtualStageCost> virtual_costs(size_t(p.pp * V));
    // What one virtual stage holds: a chunk of the stage with a pipeline, the whole model without.
    auto shapes_of = [&](int st, int ch) { return p.pp > 1 ? chunk_shapes(m, l, st, ch) : rank_shapes(m, l, st); };
    for (int st = 0; st < p.pp; ++st)
        for (int ch = 0; ch < V; ++ch) {
            const StageCost s = stage_cost(m, c, l, shapes_of(st, ch));
            sm.stage[size_t(st)] += s;
            sm.chunk[size_t(ch * p.pp + st)] = s;
            virtual_costs[size_t(ch * p.pp + st)] = {s.forward(), s.backward(), s.gemm_w};
        }
    auto simulate = [&](PipelineSchedule schedule, const PipelineShape& shape, double transfer_s) {
        return shared ? shared->pipeline(schedule, shape, virtual_costs, transfer_s)
                      : simulate_pipeline(make_schedule(schedule, shape), shape, virtual_costs, transfer_s);
    };
    if (p.pp > 1) {
        const PipelineShape shape{p.pp, l.grad_accum, V};
        sm.transfer_s =
            send_s(double(rank_shapes(m, l, 0).R * m.hidden) * (l.bf16 ? 2 : 4), group_link(c, p.tp * p.cp, p.pp));
        sm.pipeline = simulate(p.pp_schedule, shape, sm.transfer_s);
    } else {
        // Without a pipeline the engine still runs the schedule asked for (engine/train/trainer.cpp makes it at pp
        // 1 too): afab runs every forward, then every backward; 1f1b and zb1 each micro-batch's forward, then its
        // backward (zb1's W right after its B).
        const PipelineShape shape{1, l.grad_accum, 1};
        const PipelineSchedule schedule =
            p.pp_schedule == PipelineSchedule::interleaved ? PipelineSchedule::one_f_one_b : p.pp_schedule;
        sm.pipeline = simulate(schedule, shape, 0.0);
    }
    double end = -1;
    for (int st = 0; st < p.pp; ++st) {
        sm.dp.push_back(dp_cost(m, c, l, rank_shapes(m, l, st), sm.stage[size_t(st)]));
        DpCost& dp = sm.dp.back();
        double stage_end = sm.pipeline.finish[size_t(st)] + dp.exposed + dp.optimizer;
        // A backward whose gradient buckets flow on the link level of its blocking transfers (cp's ring, tp's or
        // ep's collectives) shares the link with them: TCP, like NCCL's channels, splits a link between its flows,
        // so while the buckets flow each such transfer takes up to twice its time. Once per backward with buckets
        // in flight (the last micro-batch's; every one under ZeRO-2 and 3), at most as long as they flow.
        if (dp.backward_traffic > 0) {
            StageCost shared;
            for (int ch = 0; ch < V; ++ch) shared += stage_cost(m, c, l, shapes_of(st, ch), {dp.link_level, 2.0});
            const double backwards = p.zero >= 2 ? mb : 1.0;
            const double longer = std::max(0.0, shared.backward() - sm.stage[size_t(st)].backward());
            const double wait = backwards * std::min(longer, dp.backward_traffic / backwards);
            dp.exposed += wait, stage_end += wait;
        }
        // A link carries one group's bytes at a time: when the data-parallel traffic hidden behind compute and the
        // other groups' transfers on the same level (the cp ring's, the pipeline's) need the link for longer than
        // the step, the data-parallel part waits for it, exposed.
        const double link_busy = mb * sm.stage[size_t(st)].link[size_t(dp.link_level)] + dp.exposed + dp.hidden;
        if (link_busy > stage_end) {
            const double wait = std::min(link_busy - stage_end, dp.hidden);
            dp.exposed += wait, dp.hidden -= wait, stage_end += wait;
        }
        // The compute the hidden part overlaps runs slower for it (overlap_slowdown): the stage ends that much later.
        // Charged at the end, outside the schedule: a slower last backward on a later stage would also delay the
        // earlier stages' last backwards, which this leaves out (a lower bound with a pipeline).
        dp.contention = c.overlap_slowdown_on(dp.link_level == kLinkInter ? c.inter_node : c.intra_node) * dp.hidden;
        stage_end += dp.contention;
        if (stage_end > end) end = stage_end, sm.critical_stage = st;
    }
    sm.step_s = end;
    return sm;
}

StepPieces estimate_step(const ModelDesc& m, const ClusterDesc& c, const Layout& l, SharedWork* shared) {
    // The pieces shown are those of the stage that ends last.
    const StepModel sm = model_step(m, c, l, shared);
    const double mb = l.grad_accum;
    const int crit = sm.critical_stage;
    const StageCost& w = sm.stage[size_t(crit)];
    const DpCost& dp = sm.dp[size_t(crit)];
    const double finish = sm.pipeline.finish[size_t(crit)];
    StepPieces p;
    p.forward_s = w.forward();
    p.backward_s = w.backward();
    p.gemm_s = mb * (w.gemm_f + w.gemm_b);
    p.attention_s = mb * (w.attn_f + w.attn_b);
    p.other_ops_s = mb * (w.other_f + w.other_b);
    p.recompute_s = mb * w.recompute;
    p.tp_comm_s = mb * (w.tp_f + w.tp_b);
    p.cp_comm_exposed_s = mb * (w.cp_exposed_f + w.cp_exposed_b);
    p.cp_comm_hidden_s = mb * w.cp_hidden;
    p.ep_comm_s = mb * (w.ep_f + w.ep_b);
    p.pp_comm_s = mb * w.pp;
    // The stage's idle time in the schedule beyond its own transfers: waiting for the other stages.
    const double busy = mb * (p.forward_s + p.backward_s);
    p.bubble_s = std::max(0.0, finish - busy - p.pp_comm_s);
    if (finish - busy < p.pp_comm_s) p.pp_comm_s = std::max(0.0, finish - busy);
    p.dp_comm_exposed_s = dp.exposed;
    p.dp_comm_hidden_s = dp.hidden;
    p.optimizer_s = dp.optimizer;
    p.overlap_slowdown_s = mb * (w.contention_f + w.contention_b) + dp.contention;
    p.step_s = busy + p.pp_comm_s + p.bubble_s + p.dp_comm_exposed_s + dp.contention + p.optimizer_s;
    p.compute_busy_s = mb * w.compute() + dp.contention + p.optimizer_s;
    for (size_t k = 0; k < p.link_busy_s.size(); ++k) p.link_busy_s[k] = mb * w.link[k];
    p.link_busy_s[size_t(dp.link_level)] += dp.exposed + dp.hidden;
    return p;
}

}  // namespace us::predict
