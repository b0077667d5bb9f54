#include "profiler/analysis/predict.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/core/allocator.h"
#include "engine/parallel/pipeline_schedule.h"

namespace us::prof {

namespace {

int64_t layers_on_stage(const PredictInput& in, int) { return in.layers / std::max(1, in.pp); }

// Per block per micro-batch, docs/memory.md.
int64_t block_bytes(const PredictInput& in, int64_t e) {
    const int64_t N = in.micro_batch * in.seq, C = in.hidden;
    if (in.recompute == "full") return e * N * C;
    const int64_t stats = 16 * N;
    if (in.recompute == "selective") return e * 16 * N * C + stats;
    return e * (16 * N * C + in.micro_batch * in.heads * in.seq * in.seq) + stats;
}

int64_t block_working_bytes(const PredictInput& in, int64_t e) {
    const int64_t N = in.micro_batch * in.seq, C = in.hidden;
    return e * (15 * N * C + in.micro_batch * in.heads * in.seq * in.seq) + 16 * N;
}

int64_t head_bytes(const PredictInput& in, int64_t e) {
    const int64_t N = in.micro_batch * in.seq;
    return e * N * in.hidden + 2 * N * 4 + N * in.vocab * 4 + N * 4;  // final norm output and stats, logits, losses
}

struct StageMemory {
    int64_t activations = 0;  // peak
    int64_t deferred = 0;     // peak of the weight-gradient inputs kept between B and W (ZB-H1)
};

// Walks one stage's actions in order (a stage's memory depends only on the order of its own actions):
// a forward keeps the micro-batch's tokens, its input (embedding output or received activations), its blocks'
// saved activations and, on the last virtual stage, the head's; a full backward frees them all; a split one (B)
// frees the input and the head and keeps the blocks plus 9 (N, h) output gradients per block for W, which frees
// the rest.
StageMemory walk_stage_memory(const PredictInput& in, const std::vector<PipeAction>& actions, int64_t e) {
    const int64_t N = in.micro_batch * in.seq, h = in.hidden;
    const int V = std::max(1, in.pp_chunks), S = std::max(1, in.pp) * V;
    const int64_t layers_per_chunk = in.layers / S;
    const int64_t kept = 2 * N * 4 + layers_per_chunk * block_bytes(in, e);  // until the backward (or W) is done
    const int64_t input = e * N * h;
    const int64_t deferred = layers_per_chunk * 9 * N * h * e;
    StageMemory m;
    int64_t acts = 0, pending = 0;
    for (const PipeAction& a : actions) {
        const bool head = a.chunk * in.pp + in.stage == S - 1;
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

}  // namespace

PredictInput PredictInput::from_config(const nlohmann::json& c) {
    PredictInput in;
    auto get = [&](const char* key, auto fallback) { return c.contains(key) && !c[key].is_null() ? c[key].get<decltype(fallback)>() : fallback; };
    in.vocab = get("vocab", in.vocab);
    in.hidden = get("hidden", in.hidden);
    in.layers = get("layers", in.layers);
    in.heads = get("heads", in.heads);
    in.seq = get("seq", in.seq);
    in.micro_batch = get("batch", in.micro_batch);
    in.grad_accum = get("grad_accum", in.grad_accum);
    in.bf16 = get("precision", std::string("fp32")) == "bf16";
    in.fp32_grad_accum = get("fp32_grad_accum", false);
    in.recompute = get("recompute", in.recompute);
    in.dp = get("dp", in.dp);
    in.pp = get("pp", in.pp);
    in.tp = get("tp", in.tp);
    in.cp = get("cp", in.cp);
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

Prediction predict(const PredictInput& in) {
    Prediction p;
    const int64_t h = in.hidden, v = in.vocab, L = in.layers;
    p.params = h * v + L * (12 * h * h + 13 * h) + 2 * h;
    const bool first = in.stage == 0, last = in.stage == in.pp - 1;
    const int64_t Ls = layers_on_stage(in, in.stage);
    p.params_on_rank = Ls * (12 * h * h + 13 * h) + (first || last ? h * v : 0) + (last ? 2 * h : 0);
    const int64_t n = p.params_on_rank;
    const int64_t e = in.bf16 ? 2 : 4;
    const int64_t dp = in.dp;

    // Weights, gradients, optimizer state (FORMULAS.md; ZeRO shards by dp).
    auto sharded = [&](int64_t bytes_per_param, bool shard) { return shard ? bytes_per_param * n / dp : bytes_per_param * n; };
    p.memory[size_t(MemCategory::params)] = sharded(e, in.zero >= 3);
    int64_t grads = sharded(e, in.zero >= 2);
    if (in.bf16 && in.fp32_grad_accum) grads += sharded(4, in.zero >= 2);
    p.memory[size_t(MemCategory::grads)] = grads;
    p.memory[size_t(MemCategory::master_params)] = in.bf16 ? sharded(4, in.zero >= 1) : 0;
    p.memory[size_t(MemCategory::optimizer_state)] = sharded(8, in.zero >= 1);

    // Activations and temporaries: what a micro-batch holds from its forward to its backward (docs/memory.md),
    // times how many the schedule keeps in flight on this stage, found by walking the stage's own action list.
    const int64_t N = in.micro_batch * in.seq;
    p.activations_per_layer = block_bytes(in, e);
    const int V = std::max(1, in.pp_chunks);
    const int64_t scratch = 9 * e * N * h + (last && in.bf16 ? 2 * N * v : 0);  // one backward's temporaries
    StageMemory held;
    if (in.pp > 1) {
        try {
            const PipelineShape shape{in.pp, int(in.grad_accum), V};
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
    } else {
        held = walk_stage_memory(in, {{PipeOp::forward, 0, 0}, {PipeOp::backward, 0, 0}}, e);
    }
    int64_t acts = held.activations;
    if (in.recompute == "full") acts += std::max(block_working_bytes(in, e), last ? head_bytes(in, e) : int64_t(0)) - (last ? head_bytes(in, e) : 0);
    p.memory[size_t(MemCategory::activations)] = acts;
    // A stage after the first writes its input gradient into a buffer of its own, to send it back.
    const bool sends_gradients = in.pp > 1 && (in.stage > 0 || V > 1);
    p.memory[size_t(MemCategory::temporaries)] = scratch + (sends_gradients ? e * N * h : 0) + held.deferred;
    p.memory[size_t(MemCategory::comm_buffers)] = std::nullopt;  // transient buffers: measured, not modelled
    p.memory[size_t(MemCategory::workspace)] = std::nullopt;     // op scratch: measured, not modelled

    p.flops_per_token = 6.0 * double(p.params) + 12.0 * double(L * h * in.seq);
    p.tokens_per_step = in.micro_batch * in.grad_accum * in.seq * dp;

    // Communication per rank per step: ring all-reduce moves 2K(dp-1)/dp; ZeRO-1/2 the same in reduce-scatter +
    // all-gather; ZeRO-3 gathers parameters again for backward: 3K(dp-1)/dp. K = gradient bytes of the stage.
    const double ring = dp > 1 ? double(dp - 1) / double(dp) : 0.0;
    const double K = double(e * n) + (in.bf16 && in.fp32_grad_accum ? 2.0 * double(n) : 0.0);
    p.dp_comm_bytes = int64_t((in.zero >= 3 ? 3.0 : 2.0) * K * ring);
    // One (N, h) activation per micro-batch per boundary each way; interleaving multiplies the boundaries.
    const int64_t boundaries = (first ? 0 : 1) + (last ? 0 : 1);
    p.pp_comm_bytes = in.pp > 1 ? 2 * in.grad_accum * boundaries * e * N * h * in.pp_chunks : 0;

    const double m = double(in.grad_accum), pp = double(in.pp);
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
    s += fmt::format("Model: h {} v {} L {} heads {} seq {}: N = h*v + L*(12h^2 + 13h) + 2h = {} parameters\n",
                     in.hidden, in.vocab, in.layers, in.heads, in.seq, p.params);
    s += fmt::format("Layout: dp {} pp {} tp {} cp {} ep {}, ZeRO-{}, {}, micro-batch {} x {} tokens, {} "
                     "micro-batches per step, recompute {}\n",
                     in.dp, in.pp, in.tp, in.cp, in.ep, in.zero, in.bf16 ? "bf16 mixed precision" : "fp32",
                     in.micro_batch, in.seq, in.grad_accum, in.recompute);
    if (in.pp > 1) s += fmt::format("Pipeline stage {} of {} ({} schedule): {} parameters on the rank\n", in.stage, in.pp, in.pp_schedule, p.params_on_rank);
    s += "\nMemory per rank (predicted):\n";
    for (int c = 0; c < kMemCategoryCount; ++c)
        s += fmt::format("  {:<16} {:>12}\n", kMemCategoryNames[c],
                         p.memory[size_t(c)] ? format_bytes(*p.memory[size_t(c)]) : std::string("not modelled"));
    s += fmt::format("  {:<16} {:>12}\n", "total", format_bytes(p.memory_total()));
    s += fmt::format("  activations per block per micro-batch: {} ({} micro-batch(es) in flight)\n",
                     format_bytes(p.activations_per_layer), p.micro_batches_in_flight);
    s += fmt::format("\nCompute: {:.1f} MFLOP per token (6N + 12*L*h*s), {} tokens per step, {:.2f} TFLOP per step\n",
                     p.flops_per_token / 1e6, p.tokens_per_step, p.flops_per_token * double(p.tokens_per_step) / 1e12);
    s += fmt::format("Communication per rank per step (predicted, ring): data parallel {}, pipeline {}\n",
                     format_bytes(p.dp_comm_bytes), format_bytes(p.pp_comm_bytes));
    s += fmt::format("Pipeline bubble (predicted): {:.3f} = {}", p.bubble_theory, p.bubble_formula);
    if (in.pp > 1) s += fmt::format("; {:.3f} on this stage by simulating the schedule", p.bubble_simulated);
    s += "\n";
    return s;
}

nlohmann::json prediction_json(const PredictInput& in, const Prediction& p) {
    nlohmann::json mem = nlohmann::json::object();
    for (int c = 0; c < kMemCategoryCount; ++c)
        mem[std::string(kMemCategoryNames[c])] = p.memory[size_t(c)] ? nlohmann::json(*p.memory[size_t(c)]) : nlohmann::json();
    return {{"params", p.params},
            {"params_on_rank", p.params_on_rank},
            {"memory_bytes", mem},
            {"memory_total_bytes", p.memory_total()},
            {"activations_per_layer_bytes", p.activations_per_layer},
            {"micro_batches_in_flight", p.micro_batches_in_flight},
            {"flops_per_token", p.flops_per_token},
            {"tokens_per_step", p.tokens_per_step},
            {"dp_comm_bytes_per_step", p.dp_comm_bytes},
            {"pp_comm_bytes_per_step", p.pp_comm_bytes},
            {"bubble_fraction_theory", p.bubble_theory},
            {"bubble_fraction_simulated", p.bubble_simulated},
            {"bubble_formula", p.bubble_formula}};
}

}  // namespace us::prof
