#include "profiler/predict/memory_model.h"

#include <algorithm>

#include "profiler/predict/model_shapes.h"
#include "common/schedule/pipeline_schedule.h"
#include "common/settings/config.h"
#include "profiler/predict/predict.h"
#include "profiler/predict/shared_work.h"

namespace us::predict {

int64_t MemoryEstimate::categories_total() const {
    int64_t t = 0;
    for (int64_t b : bytes) t += b;
    return t;
}

namespace {

// The engine's prediction input for a layout of an engine model: a view of the settings it would run with.
PredictInput engine_input(const ModelDesc& m, const Layout& l, int stage) {
    PredictInput in = PredictInput::from_settings(engine_settings(m, l));
    in.stage = stage;
    return in;
}

// The engine's own walk for one stage.
MemoryEstimate engine_memory(const ModelDesc& m, const Layout& l, int s) {
    const Prediction p = predict(engine_input(m, l, s));
    MemoryEstimate e;
    e.kind = "predicted";
    e.stage = s;
    e.micro_batches_in_flight = p.micro_batches_in_flight;
    e.params_on_rank = p.params_on_rank;
    for (int c = 0; c < kMemCategoryCount; ++c) {
        e.modelled[size_t(c)] = p.memory[size_t(c)].has_value();
        e.bytes[size_t(c)] = p.memory[size_t(c)].value_or(0);
    }
    return e;
}

// The generalised formulas (docs/planner.md, "Memory"), for one stage.
MemoryEstimate formula_memory(const ModelDesc& m, const Layout& l, int stage, const StageInFlight& flight) {
    const ParallelLayout& p = l.parallel;
    const RankShapes r = rank_shapes(m, l, stage);
    MemoryEstimate est;
    est.kind = "formula";
    est.stage = stage;
    est.micro_batches_in_flight = flight.micro_batches;
    est.params_on_rank = r.params + r.expert_params;
    const double e = l.bf16 ? 2 : 4;
    const double dp = double(p.dp) * p.cp, edp = double(p.dp / p.ep) * p.cp;
    auto state = [&](double bytes_per_param, bool shard) {
        return int64_t(shard ? bytes_per_param * double(r.params) / dp + bytes_per_param * double(r.expert_params) / edp
                             : bytes_per_param * double(r.params + r.expert_params));
    };
    using C = MemCategory;
    auto set = [&](C c, int64_t v) {
        est.bytes[size_t(c)] = v;
        est.modelled[size_t(c)] = true;
    };
    set(C::params, state(e, p.zero >= 3));
    set(C::grads, state(e + (l.bf16 && l.fp32_grad_accum ? 4 : 0), p.zero >= 2));
    set(C::master_params, l.bf16 ? state(4, p.zero >= 1) : 0);
    set(C::optimizer_state, state(8, p.zero >= 1));
    // Activations: the stage's layers per chunk in flight, plus the embedding output on the first stage and the
    // head (final norm output, fp32 logits) on the last.
    const double per_chunk = double(r.layer_activation_bytes) * double(r.dense_layers) / double(r.chunks) +
                             double(r.moe_layer_activation_bytes) * double(r.moe_layers) / double(r.chunks);
    double acts = per_chunk * double(flight.chunks);
    if (r.first) acts += e * double(r.R * m.hidden) * flight.micro_batches;
    if (r.last) acts += (e * double(r.R * m.hidden) + 4.0 * double(r.T * r.Vr)) * flight.last_chunk_micro_batches;
    set(C::activations, int64_t(acts));
    // Temporaries: one backward's gradient scratch, fp32 logit gradients on the last stage, and under full
    // recomputation one layer's activations rebuilt while its backward runs.
    double temps = e * double(r.T) * double(3 * m.hidden + r.qkv_width + r.ffn_width);
    if (r.last) temps += 4.0 * double(r.T * r.Vr);
    if (l.recompute == Recompute::full) temps += double(r.layer_activation_bytes_no_recompute);
    set(C::temporaries, int64_t(temps));
    // Communication buffers: the gradient buckets in flight (two), ZeRO-3's gathered parameters (two layers).
    double comm = p.dp * p.cp > 1 ? 2.0 * p.bucket_mb * 1048576.0 : 0.0;
    if (p.zero >= 3) comm += 2.0 * e * double(r.params) / std::max<int64_t>(1, r.layers);
    // Context parallelism's buffers during a layer's backward (engine/model/context_parallel*.cpp): the ring's two
    // key/value blocks and four fp32 gradient blocks, or the all-gather's cp key/value blocks and cp fp32 gradient
    // shares (the keys and values are given back before the rank's own sum is received).
    if (p.cp > 1) {
        const double kv = double(r.T) * double(r.qkv_width - r.attn_width);
        comm += p.cp_comm == CpComm::allgather ? kv * double(p.cp) * (e + 4.0) : kv * (2.0 * e + 16.0);
    }
    set(C::comm_buffers, int64_t(comm));
    return est;
}

}  // namespace

namespace {
MemoryEstimate stage_memory(const ModelDesc& m, const ClusterDesc& cluster, const Layout& l, int stage,
                            const std::vector<StageInFlight>& flight) {
    MemoryEstimate e = m.family == ModelFamily::engine_gpt ? engine_memory(m, l, stage)
                                                           : formula_memory(m, l, stage, flight[size_t(stage)]);
    e.reserved_bytes = cluster.reserved_bytes;
    return e;
}
}  // namespace

MemoryEstimate estimate_stage_memory(const ModelDesc& m, const ClusterDesc& cluster, const Layout& l, int stage) {
    return stage_memory(m, cluster, l, stage, stages_in_flight(l));
}

MemoryEstimate estimate_memory(const ModelDesc& m, const ClusterDesc& cluster, const Layout& l, SharedWork* shared) {
    // The busiest stage wins. The schedule is simulated once for all stages (and, in a search, once for every
    // layout that runs it).
    const std::vector<StageInFlight> flight = shared ? shared->in_flight(l) : stages_in_flight(l);
    MemoryEstimate best;
    for (int s = 0; s < l.parallel.pp; ++s) {
        const MemoryEstimate e = stage_memory(m, cluster, l, s, flight);
        if (s == 0 || e.categories_total() > best.categories_total()) best = e;
    }
    return best;
}

}  // namespace us::predict
