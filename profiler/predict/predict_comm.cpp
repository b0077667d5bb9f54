// The prediction's communication per rank per step (docs/formulas.md): bytes sent by process group for ring
// algorithms, each from the engine's exact walk of the collectives it issues (data parallelism and ZeRO-3's gathers
// bucket by bucket, tensor, context and expert parallelism's lists), beside the textbook's figures.
#include <algorithm>
#include <cmath>
#include <string>

#include "profiler/predict/predict_shape.h"
#include "profiler/predict/ring_bytes.h"

namespace us::predict {

namespace {

// Every collective a rank issues per step in its tensor-parallel group (docs/formulas.md, "Tensor parallelism: what
// the engine sends"). K = one (N,C) activation in the compute dtype.
std::vector<PredictedCollective> tp_collectives(const PredictInput& in, int64_t e, int64_t replicated_grad_bytes,
                                                bool first, bool last) {
    const RankShape r = rank_shape(in);
    std::vector<PredictedCollective> out;
    if (r.tp == 1) return out;
    const int64_t K = r.N * r.C * e, m = in.grad_accum, blocks = layers_on_stage(in);
    const int64_t recompute = in.recompute == Recompute::full ? 2 : 1;  // full recomputation runs the forward's again
    auto add = [&](std::string what, prof::OpClass op, int64_t bytes, int64_t count) {
        if (count > 0) out.push_back({std::move(what), op, bytes, count});
    };
    using O = prof::OpClass;
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

// Context parallelism's transfers a rank sends per step (docs/formulas.md), per layer and micro-batch. The ring:
// forward passes its key/value block on cp - 1 times; backward passes the blocks on again cp - 1 times and a partial
// key/value gradient (fp32) cp times, the last one to the block's owner. The all-gather: every rank's key/value
// blocks gathered in forward and again in backward, and the cp blocks of fp32 key/value gradients reduce-scattered.
// Full recomputation runs the forward's transfers again.
std::vector<PredictedCollective> cp_collectives(const PredictInput& in, int64_t e) {
    const RankShape r = rank_shape(in);
    std::vector<PredictedCollective> out;
    if (r.cp == 1) return out;
    const int64_t kv = 2 * r.N * r.Ca, m = in.grad_accum, blocks = layers_on_stage(in);
    const int64_t recompute = in.recompute == Recompute::full ? 2 : 1;
    if (in.parallel.cp_comm == CpComm::allgather) {
        out.push_back(
            {"cp all-gather: keys and values", prof::OpClass::all_gather, r.cp * kv * e, blocks * m * (recompute + 1)});
        out.push_back({"cp reduce-scatter: key/value gradients (fp32)", prof::OpClass::reduce_scatter, r.cp * kv * 4,
                       blocks * m});
    } else {
        out.push_back({"ring attention: key/value blocks", prof::OpClass::send, kv * e,
                       (r.cp - 1) * blocks * m * (recompute + 1)});
        out.push_back(
            {"ring attention: key/value gradient blocks (fp32)", prof::OpClass::send, kv * 4, r.cp * blocks * m});
    }
    // MoE blocks: each sequence's routing statistics for the balance loss, gathered over the ranks of its positions
    const int64_t moe = moe_layers_on_stage(in);
    if (moe > 0)
        out.push_back({"MoE blocks: per-sequence routing statistics (all-gather, fp64)", prof::OpClass::all_gather,
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
    const int64_t m = in.grad_accum, blocks = moe_layers_on_stage(in),
                  forwards = in.recompute == Recompute::full ? 2 : 1;
    const int64_t rows = r.X * (r.ep - 1) / r.ep * r.C * e;
    out.push_back(
        {"row counts per expert", prof::OpClass::all_to_all, (r.ep - 1) * (r.E / r.ep) * 4, forwards * blocks * m});
    out.push_back(
        {"forward: rows to the experts and back", prof::OpClass::all_to_all, rows, 2 * forwards * blocks * m});
    out.push_back({"backward: row gradients to the experts and back", prof::OpClass::all_to_all, rows, 2 * blocks * m});
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

// ZeRO-3's parameter gathers of every micro-batch's forward and backward, as elements gathered per step: the units of
// the rank's layout (embedding, blocks, final norm), and apart the MoE blocks' experts, a state of their own.
struct Zero3Gathers {
    int64_t elements = 0, expert_elements = 0;
};
Zero3Gathers zero3_gathers(const PredictInput& in, const RankShape& r, int64_t e) {
    const int64_t h = in.hidden, L = in.layers, tp = r.tp;
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
    const bool full = in.recompute == Recompute::full;
    std::vector<UnitUse> uses = {{emb, true, true}, {emb, false, true}};
    std::vector<UnitUse> expert_uses;
    for (int l = 0, x = 0; l < int(L); ++l) {
        uses.push_back({l + 1, true, true});
        uses.push_back({l + 1, false, true});
        if (is_moe_layer(in, l)) expert_uses.insert(expert_uses.end(), {{x, true, true}, {x++, false, true}});
    }
    uses.insert(uses.end(), {{fin, true, true},
                             {emb, true, true},
                             {emb, false, true},
                             {fin, false, true},
                             {fin, true, false},
                             {emb, true, false},
                             {emb, false, false},
                             {fin, false, false}});
    for (int l = int(L) - 1, x = int(expert_numel.size()) - 1; l >= 0; --l) {
        uses.push_back({l + 1, true, false});
        uses.push_back({l + 1, false, false});
        if (is_moe_layer(in, l)) {
            const int times = full ? 2 : 1;  // full recomputation runs the block's forward again first
            for (int t = 0; t < times; ++t)
                expert_uses.insert(expert_uses.end(), {{x, true, false}, {x, false, false}});
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
    const std::vector<bool> no_blocks(expert_numel.size(), false);
    return {zero3_gathered_elements(numel, is_block, in.parallel.bucket_mb, e, repeated(uses)),
            zero3_gathered_elements(expert_numel, no_blocks, in.parallel.bucket_mb, e, repeated(expert_uses))};
}

int64_t& group_bytes(Prediction& p, prof::GroupKind g) { return p.comm_bytes[size_t(g)]; }

// dp: K gradient bytes of the rank's shard of the model; ZeRO-0 and 1 all-reduce (or reduce-scatter + all-gather)
// them once per step, ZeRO-2 reduce-scatters at every micro-batch, ZeRO-3 also all-gathers the parameters for every
// forward and backward (ZeRO-3 runs without pipelines). The experts' copies (edp) the same over their own ranks.
void data_parallel_bytes(const PredictInput& in, const RankContext& rc, Prediction& p) {
    const int64_t dp = rc.dp, edp = rc.edp, e = rc.e;
    const double ring = dp > 1 ? double(dp - 1) / double(dp) : 0.0;
    // Bytes per parameter the engine's collectives carry (engine/parallel/zero_state.cpp, replicated_state.cpp):
    // ZeRO-0 all-reduces the accumulated gradients (fp32 with --fp32-grad-accum); ZeRO-1 reduce-scatters them and
    // all-gathers the updated parameters (compute dtype); ZeRO-2 reduce-scatters every micro-batch's gradients in
    // the compute dtype and all-gathers the parameters; ZeRO-3 the reduce-scatters (its gathers are added below).
    const double accumulated = in.bf16 && in.fp32_grad_accum ? 4.0 : double(e);
    const double m = double(in.grad_accum);
    const double bytes_per_param = in.parallel.zero == 0   ? 2.0 * accumulated
                                   : in.parallel.zero == 1 ? accumulated + double(e)
                                   : in.parallel.zero == 2 ? (m + 1.0) * double(e)
                                                           : m * double(e);
    group_bytes(p, prof::GroupKind::dp) = int64_t(bytes_per_param * double(rc.n) * ring);
    if (in.parallel.zero >= 3 && in.parallel.pp == 1) {
        const Zero3Gathers g = zero3_gathers(in, rc.r, e);
        group_bytes(p, prof::GroupKind::dp) += int64_t(double(g.elements) * double(e) * ring);
        group_bytes(p, prof::GroupKind::edp) +=
            int64_t(double(g.expert_elements) * double(e) * (edp > 1 ? double(edp - 1) / double(edp) : 0.0));
    }
    const double expert_ring = edp > 1 ? double(edp - 1) / double(edp) : 0.0;  // edp: the experts' copies
    group_bytes(p, prof::GroupKind::edp) += int64_t(bytes_per_param * double(rc.nx) * expert_ring);
    // (The loss and the MoE routing statistics are summed after the step's span, outside these figures.)
}

// tp: the engine's collectives; the replicated parameters' gradients (LayerNorms, row-parallel biases) that sequence
// parallelism all-reduces are 6h per block and 2h for the final norm (a ZeRO shard holds 1/dp). Beside them the
// textbook: 2 all-reduces of sbh per block in forward and 2 in backward, 2(tp-1)/tp each.
void tensor_parallel_bytes(const PredictInput& in, const RankContext& rc, Prediction& p) {
    const int64_t h = in.hidden, tp = rc.r.tp, e = rc.e;
    const int64_t grad_e = in.bf16 && !in.fp32_grad_accum ? 2 : 4;
    const int64_t replicated = ((rc.Ls - rc.Lm) * 6 * h + rc.Lm * 5 * h + (rc.last ? 2 * h : 0)) * grad_e /
                               (in.parallel.zero >= 1 ? rc.dp : 1);
    p.tp_collectives = tp_collectives(in, e, replicated, rc.first, rc.last);
    double tp_sent = 0;
    for (const PredictedCollective& c : p.tp_collectives)
        tp_sent += double(c.count) * bytes_sent(c.op, double(c.bytes), int(tp));
    group_bytes(p, prof::GroupKind::tp) = int64_t(std::llround(tp_sent));
    p.tp_comm_bytes_formula = tp > 1 ? int64_t(4.0 * double(rc.Ls) * double(in.grad_accum) * double(rc.r.N * h * e) *
                                               2.0 * double(tp - 1) / double(tp))
                                     : 0;
}

// ep: the all-to-alls, and the textbook's 4 of K b s h (ep - 1)/ep per MoE block per micro-batch.
void expert_parallel_bytes(const PredictInput& in, const RankContext& rc, Prediction& p) {
    const RankShape& r = rc.r;
    p.ep_collectives = ep_collectives(in, rc.e);
    for (const PredictedCollective& c : p.ep_collectives) group_bytes(p, prof::GroupKind::ep) += c.count * c.bytes;
    if (r.ep > 1)
        p.ep_comm_bytes_formula = 4 * rc.Lm * in.grad_accum * in.moe_topk * r.N * in.hidden * rc.e * (r.ep - 1) / r.ep;
}

}  // namespace

void predict_communication(const PredictInput& in, const RankContext& rc, Prediction& p) {
    const RankShape& r = rc.r;
    const int64_t h = in.hidden;
    data_parallel_bytes(in, rc, p);
    // pp: one (R, h) activation per micro-batch per virtual stage boundary each way. A rank holds V virtual stages
    // (s, s + pp, ...); each sends forward but the model's last and backward but its first
    // (engine/parallel/pipeline_executor.cpp): 2V per micro-batch, one less on the first and on the last rank.
    const int64_t transfers = 2 * in.parallel.pp_chunks - (rc.first ? 1 : 0) - (rc.last ? 1 : 0);
    group_bytes(p, prof::GroupKind::pp) += in.parallel.pp > 1 ? in.grad_accum * transfers * rc.e * r.R * h : 0;
    tensor_parallel_bytes(in, rc, p);
    // cp: the ring's or the all-gather's transfers.
    p.cp_collectives = cp_collectives(in, rc.e);
    for (const PredictedCollective& c : p.cp_collectives)
        group_bytes(p, prof::GroupKind::cp) += int64_t(
            std::llround(c.op == prof::OpClass::send ? double(c.count * c.bytes)
                                                     : double(c.count) * bytes_sent(c.op, double(c.bytes), r.cp)));
    expert_parallel_bytes(in, rc, p);
    // The tied embedding's gradient summed between the first and the last stage; the gradient norm's scalar.
    const int64_t grad_e = in.bf16 && !in.fp32_grad_accum ? 2 : 4;
    if (in.parallel.pp > 1 && (rc.first || rc.last))
        group_bytes(p, prof::GroupKind::embedding) = int64_t(h * r.Vr * grad_e / (in.parallel.zero >= 1 ? rc.dp : 1));
    const int64_t world = int64_t(in.parallel.dp) * in.parallel.pp * r.tp * in.parallel.cp;  // ep shares the dp ranks
    if (world > 1) group_bytes(p, prof::GroupKind::world) = int64_t(2.0 * 8.0 * double(world - 1) / double(world));
    p.dp_comm_bytes = group_bytes(p, prof::GroupKind::dp);
    p.pp_comm_bytes = group_bytes(p, prof::GroupKind::pp);
}

}  // namespace us::predict
