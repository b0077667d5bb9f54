#include "engine/parallel/pipeline_schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "engine/core/check.h"

namespace us {

namespace {

Schedule afab(const PipelineShape& s) {
    Schedule out(size_t(s.pp));
    for (int st = 0; st < s.pp; ++st) {
        for (int mb = 0; mb < s.micro_batches; ++mb) out[size_t(st)].push_back({PipeOp::forward, mb, 0});
        for (int mb = 0; mb < s.micro_batches; ++mb) out[size_t(st)].push_back({PipeOp::backward, mb, 0});
    }
    return out;
}

Schedule one_f_one_b(const PipelineShape& s) {
    Schedule out(size_t(s.pp));
    const int m = s.micro_batches;
    for (int st = 0; st < s.pp; ++st) {
        auto& a = out[size_t(st)];
        const int warmup = std::min(s.pp - st - 1, m);
        for (int i = 0; i < warmup; ++i) a.push_back({PipeOp::forward, i, 0});  // warm-up
        for (int i = 0; i < m - warmup; ++i) {                                   // steady state
            a.push_back({PipeOp::forward, warmup + i, 0});
            a.push_back({PipeOp::backward, i, 0});
        }
        for (int i = m - warmup; i < m; ++i) a.push_back({PipeOp::backward, i, 0});  // cool-down
    }
    return out;
}

// Megatron-LM's interleaved 1F1B: forward unit k runs chunk (k / pp) % V of micro-batch (k / (pp V)) pp + k % pp;
// backwards walk the chunks in reverse.
Schedule interleaved(const PipelineShape& s) {
    Schedule out(size_t(s.pp));
    const int pp = s.pp, V = s.chunks, total = s.micro_batches * V;
    auto unit = [&](int k, bool forward) {
        const int chunk = (k / pp) % V;
        return PipeAction{forward ? PipeOp::forward : PipeOp::backward, (k / (pp * V)) * pp + k % pp,
                          forward ? chunk : V - 1 - chunk};
    };
    for (int st = 0; st < pp; ++st) {
        auto& a = out[size_t(st)];
        int warmup = s.micro_batches == pp ? total : (pp - st - 1) * 2 + (V - 1) * pp;
        warmup = std::min(warmup, total);
        for (int k = 0; k < warmup; ++k) a.push_back(unit(k, true));
        for (int k = 0; k < total - warmup; ++k) {
            a.push_back(unit(warmup + k, true));
            a.push_back(unit(k, false));
        }
        for (int k = total - warmup; k < total; ++k) a.push_back(unit(k, false));
    }
    return out;
}

// ZB-H1 by list scheduling on unit costs (F = B = W = 1): whenever a stage is free it runs, in this order of
// preference, a ready B (it is on the critical path), a ready F if fewer than pp - stage micro-batches hold
// activations (1F1B's memory), or a pending W. W therefore lands where the stage would otherwise wait.
Schedule zero_bubble_h1(const PipelineShape& s) {
    const int pp = s.pp, m = s.micro_batches;
    Schedule out(static_cast<size_t>(pp));
    std::vector<double> free_at(static_cast<size_t>(pp), 0.0);
    // end times of F and B per (stage, mb); -1 = not done
    std::vector<std::vector<double>> f_end(size_t(pp), std::vector<double>(size_t(m), -1)), b_end = f_end;
    std::vector<int> next_f(size_t(pp), 0), next_b(size_t(pp), 0), in_flight(size_t(pp), 0);
    std::vector<std::vector<int>> pending_w(static_cast<size_t>(pp));
    size_t remaining = size_t(pp) * size_t(m) * 3;
    while (remaining > 0) {
        // the stage that can act earliest
        int best = -1;
        double best_t = 1e300;
        PipeAction best_action{};
        for (int st = 0; st < pp; ++st) {
            auto consider = [&](double ready, PipeAction a) {
                const double t = std::max(ready, free_at[size_t(st)]);
                if (t < best_t - 1e-9) {
                    best_t = t;
                    best = st;
                    best_action = a;
                }
            };
            const int nb = next_b[size_t(st)], nf = next_f[size_t(st)];
            // candidates in preference order: B, F, W; a later candidate wins only if it can start earlier
            double t_b = 1e300, t_f = 1e300;
            if (nb < m && f_end[size_t(st)][size_t(nb)] >= 0 && (st == pp - 1 || b_end[size_t(st + 1)][size_t(nb)] >= 0))
                t_b = std::max(f_end[size_t(st)][size_t(nb)], st == pp - 1 ? 0.0 : b_end[size_t(st + 1)][size_t(nb)]);
            if (nf < m && in_flight[size_t(st)] < pp - st && (st == 0 || f_end[size_t(st - 1)][size_t(nf)] >= 0))
                t_f = st == 0 ? 0.0 : f_end[size_t(st - 1)][size_t(nf)];
            const double start_b = std::max(t_b, free_at[size_t(st)]), start_f = std::max(t_f, free_at[size_t(st)]);
            const double start_w = pending_w[size_t(st)].empty() ? 1e300 : free_at[size_t(st)];
            // prefer B, then F, then W, among what can start at the stage's earliest possible moment
            const double earliest = std::min({start_b, start_f, start_w});
            if (earliest >= 1e299) continue;
            if (start_b <= earliest + 1e-9) consider(t_b, {PipeOp::backward_input, nb, 0});
            else if (start_f <= earliest + 1e-9) consider(t_f, {PipeOp::forward, nf, 0});
            else consider(free_at[size_t(st)], {PipeOp::backward_weight, pending_w[size_t(st)].front(), 0});
        }
        US_ASSERT(best >= 0, "zb1 list scheduling found no runnable action");
        const size_t st = size_t(best);
        const double end = best_t + 1.0;
        free_at[st] = end;
        out[st].push_back(best_action);
        const size_t mb = size_t(best_action.micro_batch);
        switch (best_action.op) {
            case PipeOp::forward:
                f_end[st][mb] = end;
                ++next_f[st];
                ++in_flight[st];
                break;
            case PipeOp::backward_input:
                b_end[st][mb] = end;
                ++next_b[st];
                pending_w[st].push_back(int(mb));
                break;
            default:
                pending_w[st].erase(pending_w[st].begin());
                --in_flight[st];  // W frees the activations
                break;
        }
        --remaining;
    }
    return out;
}

}  // namespace

void validate_schedule_shape(const std::string& name, const PipelineShape& s) {
    US_CHECK_INPUT(name == "afab" || name == "1f1b" || name == "interleaved" || name == "zb1",
                   "unknown --pp-schedule '{}': expected afab, 1f1b, interleaved or zb1", name);
    US_CHECK_INPUT(s.pp >= 1 && s.micro_batches >= 1 && s.chunks >= 1, "pipeline shape must be positive");
    US_CHECK_INPUT(name == "interleaved" || s.chunks == 1,
                   "--pp-chunks {} needs --pp-schedule interleaved (the other schedules run one chunk per rank)",
                   s.chunks);
    if (name == "interleaved") {
        US_CHECK_INPUT(s.pp >= 2, "the interleaved schedule needs --pp 2 or more");
        US_CHECK_INPUT(s.chunks >= 2, "the interleaved schedule needs --pp-chunks 2 or more (chunks per rank)");
        US_CHECK_INPUT(s.micro_batches >= s.pp && s.micro_batches % s.pp == 0,
                       "the interleaved schedule needs the micro-batches (--grad-accum {}) to be a multiple of --pp "
                       "{} and at least as many",
                       s.micro_batches, s.pp);
    }
}

Schedule make_schedule(const std::string& name, const PipelineShape& shape) {
    validate_schedule_shape(name, shape);
    if (name == "afab") return afab(shape);
    if (name == "1f1b") return one_f_one_b(shape);
    if (name == "interleaved") return interleaved(shape);
    return zero_bubble_h1(shape);
}

std::string action_label(const PipeAction& a, int chunks) {
    const char* op = a.op == PipeOp::forward ? "F" : a.op == PipeOp::backward_weight ? "W" : "B";
    return chunks > 1 ? fmt::format("{}{}.c{}", op, a.micro_batch, a.chunk) : fmt::format("{}{}", op, a.micro_batch);
}

Simulation simulate_schedule(const Schedule& schedule, const PipelineShape& shape, double fc, double bc) {
    const int pp = shape.pp, V = shape.chunks, S = pp * V;
    Simulation sim;
    // end time of each action kind per (virtual stage, micro-batch)
    std::map<std::tuple<int, int, int>, double> done;  // (op kind: 0 F, 1 B(or input), 2 W) x vstage x mb
    auto key = [](int kind, int vs, int mb) { return std::make_tuple(kind, vs, mb); };
    std::vector<size_t> next(size_t(pp), 0);
    std::vector<double> free_at(size_t(pp), 0.0), busy(size_t(pp), 0.0);
    std::vector<int> held(size_t(pp), 0);
    sim.max_in_flight.assign(size_t(pp), 0);
    size_t left = 0;
    for (const auto& a : schedule) left += a.size();
    bool split = false;
    for (const auto& stage : schedule)
        for (const auto& a : stage) split |= a.op == PipeOp::backward_weight;
    while (left > 0) {
        bool progressed = false;
        for (int st = 0; st < pp; ++st) {
            while (next[size_t(st)] < schedule[size_t(st)].size()) {
                const PipeAction& a = schedule[size_t(st)][next[size_t(st)]];
                const int vs = a.chunk * pp + st;
                double ready = 0;
                bool ok = true;
                auto need = [&](int kind, int v, int mb) {
                    auto it = done.find(key(kind, v, mb));
                    if (it == done.end()) ok = false;
                    else ready = std::max(ready, it->second);
                };
                // a chunk holds 1/V of the stage's layers
                double cost = fc / V;
                if (a.op == PipeOp::forward) {
                    if (vs > 0) need(0, vs - 1, a.micro_batch);
                } else if (a.op == PipeOp::backward_weight) {
                    need(1, vs, a.micro_batch);
                    cost = bc / 2 / V;
                } else {
                    need(0, vs, a.micro_batch);
                    if (vs < S - 1) need(1, vs + 1, a.micro_batch);
                    cost = (a.op == PipeOp::backward_input ? bc / 2 : bc) / V;
                }
                if (!ok) break;
                const double start = std::max(ready, free_at[size_t(st)]);
                const double end = start + cost;
                free_at[size_t(st)] = end;
                busy[size_t(st)] += cost;
                const int kind = a.op == PipeOp::forward ? 0 : a.op == PipeOp::backward_weight ? 2 : 1;
                done[key(kind, vs, a.micro_batch)] = end;
                sim.actions.push_back({a, st, start, end});
                // activations are held from F until B (or W when the backward is split)
                if (a.op == PipeOp::forward) held[size_t(st)]++;
                if ((!split && a.op == PipeOp::backward) || a.op == PipeOp::backward_weight) held[size_t(st)]--;
                sim.max_in_flight[size_t(st)] = std::max(sim.max_in_flight[size_t(st)], held[size_t(st)]);
                ++next[size_t(st)];
                --left;
                progressed = true;
            }
        }
        US_CHECK_INPUT(progressed || left == 0, "the pipeline schedule deadlocks: a stage waits for an action that "
                                                "no stage can run first");
    }
    for (double f : free_at) sim.makespan = std::max(sim.makespan, f);
    for (int st = 0; st < pp; ++st) sim.bubble.push_back(busy[size_t(st)] > 0 ? (sim.makespan - busy[size_t(st)]) / busy[size_t(st)] : 0);
    // The in-flight count is over chunks: express it in micro-batches of a whole stage.
    sim.max_chunks_in_flight = sim.max_in_flight;
    if (V > 1)
        for (int& n : sim.max_in_flight) n = (n + V - 1) / V;
    return sim;
}

}  // namespace us
