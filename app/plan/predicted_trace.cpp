// A layout's predicted step as a trace (predicted_trace.h): each pipeline stage's representative rank, its actions
// placed where the simulated schedule puts them and drawn piece by piece (action_pieces.h), the memory following
// them, the data-parallel reduction and the optimizer; its metadata from predicted_metadata.h.
#include "app/plan/predicted_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <iterator>

#include "app/plan/action_pieces.h"
#include "common/core/output_file.h"
#include "profiler/predict/model_shapes.h"
#include "app/plan/predicted_metadata.h"
#include "app/plan/rank_writer.h"
#include "common/core/check.h"
#include "profiler/trace/trace_store.h"
#include "profiler/transport/trace_file.h"

namespace us::plan {

namespace {

using prof::Lane;
using prof::OpClass;
using prof::Phase;
using prof::SpanKind;

constexpr int64_t kOriginNs = 1'000'000'000;  // the predicted clock starts at 1 s (0 reads as "no time")

// The first layer of virtual stage `vs` (model_shapes.cpp lays stages out the same way).
int64_t first_layer_of(const predict::ModelDesc& m, const predict::Layout& l, int chunks, int vs) {
    const int64_t stages = int64_t(l.parallel.pp) * chunks, per_chunk = (m.layers + stages - 1) / stages;
    return std::min(m.layers - 1, int64_t(vs) * per_chunk);
}

struct RankContext {
    predict::MemoryEstimate memory;
    double activation_unit = 0;  // bytes one (micro-batch, chunk) holds
};

void draw_action(RankWriter& w, const predict::ModelDesc& m, const predict::ClusterDesc& c, const predict::Layout& l,
                 const predict::StepModel& sm, const predict::TimedAction& ta, double offset, int step, bool detailed,
                 const RankContext& rc) {
    const int pp = l.parallel.pp, vs = ta.action.chunk * pp + ta.rank, S = pp * sm.chunks;
    const predict::RankShapes r =
        pp > 1 ? predict::chunk_shapes(m, l, ta.rank, ta.action.chunk) : predict::rank_shapes(m, l, ta.rank);
    const ActionPieces pieces(m, c, l, sm.chunk[size_t(vs)], r, first_layer_of(m, l, sm.chunks, vs), detailed);
    const PipeOp op = ta.action.op;
    const bool forward = op == PipeOp::forward;
    const std::vector<Piece> list =
        forward ? pieces.forward() : pieces.backward(op != PipeOp::backward_weight, op != PipeOp::backward_input);
    const Phase phase = forward ? Phase::forward : Phase::backward;
    const int mb = ta.action.micro_batch, chunk = ta.action.chunk;
    const double b = offset + ta.begin, e = offset + ta.end;
    // Named as the engine's pipeline executor names its actions, so the schedule diagram reads them the same way.
    w.span(Lane::compute, SpanKind::phase, phase, OpClass::none, b, e,
           forward                         ? "F"
           : op == PipeOp::backward_weight ? "W"
                                           : "B",
           step, mb, -1, chunk);
    // Scale the pieces to the simulated action (they are its own costs: the factor is 1 up to rounding).
    double total = 0;
    for (const Piece& p : list) total += p.seconds;
    const double scale = total > 0 ? (e - b) / total : 0;
    // Activations follow the layers: kept as forward passes each one, given back as backward leaves it; what the
    // layer loop does not hand out (coarse pieces, the ends of the model) settles at the action's end.
    const bool frees = !forward && op != PipeOp::backward_weight;
    const int64_t unit = int64_t(rc.activation_unit);
    const int64_t per_layer = unit / std::max<int64_t>(1, r.layers);
    int64_t moved = 0;
    auto layer_done = [&](int layer, double at) {
        if (layer < 0 || !(forward || frees)) return;
        w.memory(MemCategory::activations, at, forward ? per_layer : -per_layer, "saved activations", phase, step, mb,
                 layer);
        moved += per_layer;
    };
    if (frees)
        w.memory(MemCategory::temporaries, b, rc.memory.bytes[size_t(MemCategory::temporaries)], "backward scratch",
                 phase, step, mb);
    double t = b;
    int open_layer = -1;
    double layer_begin = b;
    for (const Piece& p : list) {
        const double d = p.seconds * scale;
        if (p.layer != open_layer) {
            if (open_layer >= 0) {
                w.span(Lane::compute, SpanKind::layer, phase, OpClass::none, layer_begin, t,
                       fmt::format("layer {}", open_layer), step, mb, open_layer, chunk);
                layer_done(open_layer, t);
            }
            open_layer = p.layer, layer_begin = t;
        }
        if (p.group >= 0) {
            w.span(Lane::comm, SpanKind::comm, phase, p.op, t, t + d, p.name, step, mb, p.layer, chunk, p.group, -1,
                   p.bytes);
        } else {
            w.span(Lane::compute, SpanKind::op, phase, p.op, t, t + d, p.name, step, mb, p.layer, chunk, 0, -1, 0,
                   p.flops);
            if (p.hidden_comm_s > 0)
                w.span(Lane::comm, SpanKind::comm, phase, OpClass::send, t, t + std::min(d, p.hidden_comm_s * scale),
                       p.hidden_name, step, mb, p.layer, chunk, p.hidden_group);
        }
        t += d;
    }
    if (open_layer >= 0) {
        w.span(Lane::compute, SpanKind::layer, phase, OpClass::none, layer_begin, e,
               fmt::format("layer {}", open_layer), step, mb, open_layer, chunk);
        layer_done(open_layer, e);
    }
    if (forward) w.memory(MemCategory::activations, e, unit - moved, "saved activations", phase, step, mb);
    if (frees) {
        w.memory(MemCategory::activations, e, -(unit - moved), "saved activations", phase, step, mb);
        w.memory(MemCategory::temporaries, e, -rc.memory.bytes[size_t(MemCategory::temporaries)], "backward scratch",
                 phase, step, mb);
    }
    // Pipeline hand-overs: the activation to the next virtual stage, the gradient to the previous one.
    if (pp > 1) {
        const bool sends = forward ? vs < S - 1 : op != PipeOp::backward_weight && vs > 0;
        if (sends) {
            const int peer = forward ? (ta.rank + 1) % pp : (ta.rank + pp - 1) % pp;
            w.span(Lane::p2p, SpanKind::comm, phase, OpClass::send, e, e + sm.transfer_s,
                   forward ? "send activation" : "send gradient", step, mb, -1, chunk, kGroupPp, peer,
                   uint64_t(double(r.R * m.hidden) * (l.bf16 ? 2 : 4)));
        }
    }
}

// Forward actions done minus backward actions done, at its largest: the (micro-batch, chunk) pairs a rank holds.
int max_in_flight(const predict::StepModel& sm, int rank) {
    int held = 0, most = 1;
    for (const predict::TimedAction& a : sm.pipeline.actions) {
        if (a.rank != rank) continue;
        if (a.action.op == PipeOp::forward)
            most = std::max(most, ++held);
        else if (a.action.op != PipeOp::backward_weight)
            --held;
    }
    return most;
}

std::vector<prof::Chunk> rank_chunks(const predict::ModelDesc& m, const predict::ClusterDesc& c,
                                     const predict::PlanResult& plan, int64_t gpus, const predict::StepModel& sm,
                                     int stage, const PredictedTraceOptions& o) {
    const predict::Layout& l = plan.layout;
    const ParallelLayout& p = l.parallel;
    RankWriter w(kOriginNs);
    RankContext rc;
    rc.memory = predict::estimate_stage_memory(m, c, l, stage);
    rc.activation_unit = double(rc.memory.bytes[size_t(MemCategory::activations)]) / max_in_flight(sm, stage);
    const predict::RankShapes shapes = predict::rank_shapes(m, l, stage);
    const bool detailed = int64_t(l.grad_accum) * shapes.layers <= o.max_detailed_layer_passes;
    const predict::DpCost& dp = sm.dp[size_t(stage)];
    const double finish = sm.pipeline.finish[size_t(stage)];
    // The model states live for the whole trace.
    for (MemCategory cat : {MemCategory::params, MemCategory::grads, MemCategory::master_params,
                            MemCategory::optimizer_state, MemCategory::comm_buffers})
        w.memory(cat, 0, rc.memory.bytes[size_t(cat)], std::string(mem_category_name(cat)), Phase::none, 0);
    for (int step = 1; step <= o.steps; ++step) {
        const double offset = double(step - 1) * sm.step_s;
        w.span(Lane::host, SpanKind::step, Phase::none, OpClass::none, offset, offset + sm.step_s,
               fmt::format("step {}", step), step);
        const predict::TimedAction* last_backward = nullptr;
        for (const predict::TimedAction& a : sm.pipeline.actions) {
            if (a.rank != stage) continue;
            draw_action(w, m, c, l, sm, a, offset, step, detailed, rc);
            if (a.action.op != PipeOp::forward) last_backward = &a;
        }
        // Data parallelism: the part of the reduction behind the last backward, then what stays exposed.
        // Bytes the rank sends for it (ring): 2 (n - 1) / n of the gradients for an all-reduce, half that for a
        // reduce-scatter, shared between the hidden and the exposed spans by their time.
        const int n = p.dp * p.cp;
        const double grad_bytes = double(shapes.params + shapes.expert_params) * (l.bf16 && !l.fp32_grad_accum ? 2 : 4);
        const double sent = n > 1 ? (p.zero >= 1 ? 1.0 : 2.0) * (n - 1) / n * grad_bytes : 0.0;
        const double dp_total = dp.hidden + dp.exposed;
        auto share = [&](double s) { return uint64_t(dp_total > 0 ? sent * s / dp_total : 0); };
        if (dp.hidden > 0 && last_backward) {
            const double end = offset + last_backward->end,
                         begin = std::max(offset + last_backward->begin, end - dp.hidden);
            w.span(Lane::comm, SpanKind::comm, Phase::backward,
                   p.zero >= 1 ? OpClass::reduce_scatter : OpClass::all_reduce, begin, end,
                   "dp gradient buckets (behind backward)", step, -1, -1, 0, kGroupDp, -1, share(dp.hidden));
        }
        double t = offset + finish;
        if (dp.contention > 0) {  // the compute beside the hidden dp traffic ran slower: charged at the stage's end
            w.span(Lane::compute, SpanKind::op, Phase::backward, OpClass::none, t, t + dp.contention,
                   "compute slowed by the dp traffic hidden beside it", step);
            t += dp.contention;
        }
        if (dp.exposed > 0) {
            w.span(Lane::comm, SpanKind::comm, Phase::backward, p.zero >= 1 ? OpClass::all_gather : OpClass::all_reduce,
                   t, t + dp.exposed, p.zero >= 1 ? "dp reduction / ZeRO gather (exposed)" : "dp all-reduce (exposed)",
                   step, -1, -1, 0, kGroupDp, -1, share(dp.exposed));
            t += dp.exposed;
        }
        w.span(Lane::compute, SpanKind::phase, Phase::optimizer, OpClass::none, t, t + dp.optimizer, "optimizer", step);
        w.span(Lane::compute, SpanKind::op, Phase::optimizer, OpClass::optimizer, t, t + dp.optimizer, "adamw", step);
        w.counter("step_ms", offset + sm.step_s, sm.step_s * 1e3, step);
        w.counter("tokens_per_s", offset + sm.step_s, plan.tokens_per_s, step);
    }

    const nlohmann::json meta = to_json(predicted_rank_metadata(m, c, plan, gpus, sm, stage, rc.memory.kind, detailed));
    std::vector<prof::Chunk> chunks(3);
    chunks[0].kind = prof::ChunkKind::metadata, chunks[0].text = meta.dump();
    prof::EventBatch batch = w.take();
    chunks[1].kind = prof::ChunkKind::events, chunks[1].strings = std::move(batch.strings),
    chunks[1].events = std::move(batch.events);
    chunks[2].kind = prof::ChunkKind::end, chunks[2].text = prof::end_note_json(true, 0, "");
    for (uint32_t i = 0; i < 3; ++i) chunks[i].rank = uint32_t(stage), chunks[i].sequence = i;
    return chunks;
}

}  // namespace

std::vector<prof::Chunk> predicted_trace(const predict::ModelDesc& m, const predict::ClusterDesc& c,
                                         const predict::PlanResult& plan, int64_t gpus,
                                         const PredictedTraceOptions& o) {
    US_CHECK_INPUT(o.steps >= 1, "a predicted trace needs at least one step (got {})", o.steps);
    const predict::StepModel sm = predict::model_step(m, c, plan.layout);
    std::vector<prof::Chunk> all;
    for (int stage = 0; stage < plan.layout.parallel.pp; ++stage) {
        std::vector<prof::Chunk> r = rank_chunks(m, c, plan, gpus, sm, stage, o);
        std::move(r.begin(), r.end(), std::back_inserter(all));
    }
    return all;
}

std::unique_ptr<prof::TraceStore> predicted_store(const predict::ModelDesc& m, const predict::ClusterDesc& c,
                                                  const predict::PlanResult& plan, int64_t gpus,
                                                  const PredictedTraceOptions& o) {
    auto store = std::make_unique<prof::TraceStore>();
    for (const prof::Chunk& chunk : predicted_trace(m, c, plan, gpus, o)) store->add_chunk(chunk);
    store->finalize();
    return store;
}

void write_predicted_trace(const std::string& path, const predict::ModelDesc& m, const predict::ClusterDesc& c,
                           const predict::PlanResult& plan, int64_t gpus, const PredictedTraceOptions& o) {
    const std::vector<prof::Chunk> chunks = predicted_trace(m, c, plan, gpus, o);
    // Written beside, then renamed: a failure leaves no half-written trace under the name asked for.
    OutputFile file(path);
    {
        prof::TraceFileWriter writer(file.write_to());
        for (const prof::Chunk& ch : chunks) {
            prof::EventBatch batch;
            if (ch.kind == prof::ChunkKind::events) batch.strings = ch.strings, batch.events = ch.events;
            writer.append(prof::encode_chunk(ch.kind, ch.rank, ch.sequence,
                                             ch.kind == prof::ChunkKind::events ? &batch : nullptr, ch.text));
        }
        writer.close();
        if (!writer.error().empty())
            throw UserError(fmt::format("could not write the predicted trace {}: {}", path, writer.error()));
    }
    file.commit();
}

}  // namespace us::plan
