#include "common/schedule/pipeline_schedule.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/core/check.h"

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
        for (int i = 0; i < m - warmup; ++i) {                                  // steady state
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

// ZB-H1 (Qi et al. 2023, section 2.1): 1F1B with the backward split into B and W, and stage st starting its W
// passes st micro-batches late. Every stage then holds pp micro-batches at most (the first stage's count under
// 1F1B, so the peak memory does not grow), B passes reach the first stage sooner, and the delayed W passes fill
// the tail where 1F1B's first stages wait. With F = B = W the bubble is (pp - 1) / (3 m) for m >= pp.
Schedule zero_bubble_h1(const PipelineShape& s) {
    const int pp = s.pp, m = s.micro_batches;
    Schedule out(static_cast<size_t>(pp));  // not size_t(pp): that would declare a function
    for (int st = 0; st < pp; ++st) {
        auto& a = out[size_t(st)];
        const int warmup = std::min(pp - st - 1, m);
        int next_forward = 0, next_weight = 0;
        for (; next_forward < warmup; ++next_forward) a.push_back({PipeOp::forward, next_forward, 0});
        for (int mb = 0; mb < m; ++mb) {
            if (next_forward < m) a.push_back({PipeOp::forward, next_forward++, 0});
            a.push_back({PipeOp::backward_input, mb, 0});
            if (mb >= st) a.push_back({PipeOp::backward_weight, next_weight++, 0});
        }
        for (; next_weight < m; ++next_weight) a.push_back({PipeOp::backward_weight, next_weight, 0});
    }
    return out;
}

}  // namespace

std::string_view schedule_name(PipelineSchedule s) { return enum_name(kPipelineSchedules, s); }

PipelineSchedule parse_pipeline_schedule(std::string_view text) {
    return parse_enum(kPipelineSchedules, text, "--pp-schedule");
}

void validate_schedule_shape(PipelineSchedule schedule, const PipelineShape& s) {
    const bool interleaving = schedule == PipelineSchedule::interleaved;
    US_CHECK_INPUT(s.pp >= 1 && s.micro_batches >= 1 && s.chunks >= 1, "pipeline shape must be positive");
    US_CHECK_INPUT(interleaving || s.chunks == 1,
                   "--pp-chunks {} needs --pp-schedule interleaved (the other schedules run one chunk per rank)",
                   s.chunks);
    if (interleaving) {
        US_CHECK_INPUT(s.pp >= 2, "the interleaved schedule needs --pp 2 or more");
        US_CHECK_INPUT(s.chunks >= 2, "the interleaved schedule needs --pp-chunks 2 or more (chunks per rank)");
        US_CHECK_INPUT(s.micro_batches >= s.pp && s.micro_batches % s.pp == 0,
                       "the interleaved schedule needs the micro-batches (--grad-accum {}) to be a multiple of --pp "
                       "{} and at least as many",
                       s.micro_batches, s.pp);
    }
}

Schedule make_schedule(PipelineSchedule schedule, const PipelineShape& shape) {
    validate_schedule_shape(schedule, shape);
    switch (schedule) {
        case PipelineSchedule::afab:
            return afab(shape);
        case PipelineSchedule::one_f_one_b:
            return one_f_one_b(shape);
        case PipelineSchedule::interleaved:
            return interleaved(shape);
        case PipelineSchedule::zb1:
            break;
    }
    return zero_bubble_h1(shape);
}

std::string action_label(const PipeAction& a, int chunks) {
    const char* op = a.op == PipeOp::forward ? "F" : a.op == PipeOp::backward_weight ? "W" : "B";
    return chunks > 1 ? fmt::format("{}{}.c{}", op, a.micro_batch, a.chunk) : fmt::format("{}{}", op, a.micro_batch);
}

Simulation simulate_schedule(const Schedule& schedule, const PipelineShape& shape, double fc, double bc) {
    const int pp = shape.pp, V = shape.chunks, S = pp * V;
    Simulation sim;
    // end time of each action kind per (virtual stage, micro-batch): (op kind: 0 F, 1 B(or input), 2 W) x vstage x
    // mb, in a flat table with a flag for "not yet" (the planner simulates thousands of schedules)
    const int M = std::max(1, shape.micro_batches);
    std::vector<double> done_at(size_t(3) * size_t(S) * size_t(M), 0.0);
    std::vector<char> done(done_at.size(), 0);
    auto key = [&](int kind, int vs, int mb) {
        US_CHECK_INPUT(mb >= 0 && mb < M, "pipeline simulation: micro-batch {} of {}", mb, M);
        return (size_t(kind) * size_t(S) + size_t(vs)) * size_t(M) + size_t(mb);
    };
    std::vector<size_t> next(size_t(pp), 0);
    std::vector<double> free_at(size_t(pp), 0.0), busy(size_t(pp), 0.0);
    std::vector<int> held(size_t(pp), 0);
    sim.max_in_flight.assign(size_t(pp), 0);
    size_t left = 0;
    for (const auto& a : schedule) left += a.size();
    sim.actions.reserve(left);
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
                    const size_t k = key(kind, v, mb);
                    if (!done[k])
                        ok = false;
                    else
                        ready = std::max(ready, done_at[k]);
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
                const size_t k = key(kind, vs, a.micro_batch);
                done[k] = 1, done_at[k] = end;
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
        US_CHECK_INPUT(progressed || left == 0,
                       "the pipeline schedule deadlocks: a stage waits for an action that "
                       "no stage can run first");
    }
    for (double f : free_at) sim.makespan = std::max(sim.makespan, f);
    for (int st = 0; st < pp; ++st)
        sim.bubble.push_back(busy[size_t(st)] > 0 ? (sim.makespan - busy[size_t(st)]) / busy[size_t(st)] : 0);
    // The in-flight count is over chunks: express it in micro-batches of a whole stage.
    sim.max_chunks_in_flight = sim.max_in_flight;
    if (V > 1)
        for (int& n : sim.max_in_flight) n = (n + V - 1) / V;
    return sim;
}

}  // namespace us
