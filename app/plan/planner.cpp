#include "app/plan/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "app/plan/evaluate_layouts.h"
#include "common/core/format.h"
#include "common/settings/gpt_config.h"

namespace us::plan {

namespace {

std::vector<int> divisors(int64_t n) {
    std::vector<int> d;
    for (int64_t i = 1; i <= n; ++i)
        if (n % i == 0) d.push_back(int(i));
    return d;
}

// The pieces a slower layout loses time in, next to the best one's: the largest difference names why it loses.
std::string why_slower(const predict::PlanResult& r, const predict::PlanResult& best) {
    const predict::StepPieces &a = r.time, &b = best.time;
    const std::vector<std::pair<std::string, double>> deltas = {
        {"pipeline bubble", a.bubble_s - b.bubble_s},
        {"exposed tensor-parallel communication", a.tp_comm_s - b.tp_comm_s},
        {"exposed data-parallel / ZeRO communication", a.dp_comm_exposed_s - b.dp_comm_exposed_s},
        {"exposed context-parallel communication", a.cp_comm_exposed_s - b.cp_comm_exposed_s},
        {"expert-parallel all-to-alls", a.ep_comm_s - b.ep_comm_s},
        {"pipeline transfers", a.pp_comm_s - b.pp_comm_s},
        {"recomputation", a.recompute_s - b.recompute_s},
        {"slower compute (smaller GEMMs, less efficient)",
         (a.gemm_s + a.attention_s + a.other_ops_s) - (b.gemm_s + b.attention_s + b.other_ops_s)},
        {"optimizer", a.optimizer_s - b.optimizer_s},
        {"compute slowed by hidden communication", a.overlap_slowdown_s - b.overlap_slowdown_s},
    };
    if (a.step_s <= b.step_s * 1.005) return "as fast as the best (within 0.5%)";
    const auto worst = std::max_element(deltas.begin(), deltas.end(),
                                        [](const auto& x, const auto& y) { return x.second < y.second; });
    return fmt::format("{:.0f}% slower than the best: {} (+{:.3g} s)", 100.0 * (a.step_s / b.step_s - 1.0),
                       worst->first, worst->second);
}

}  // namespace

SearchOptions default_search_options(const predict::ClusterDesc& cluster) {
    SearchOptions o;
    o.bf16 = cluster.default_precision == "bf16";
    o.flash = !cluster.calibrated;
    return o;
}

SearchResult search(const predict::ModelDesc& m, const predict::ClusterDesc& c, const SearchOptions& o) {
    SearchResult out;
    std::map<std::string, int64_t> pruned;
    const int64_t B = o.global_batch_sequences;
    int64_t candidates = 0;
    // A layout the loops below make: sampled (o.sample_stride), then (evaluate_layouts, below) checked by the rules
    // the engine and `ultrascope plan` share, and evaluated. Their order is the ranking's for equal step times.
    std::vector<predict::Layout> layouts;
    const auto consider = [&](const predict::Layout& l) {
        if (candidates++ % std::max<int64_t>(1, o.sample_stride) != 0) {
            ++out.sampled_out;
            return;
        }
        layouts.push_back(l);
    };
    for (int tp : divisors(o.gpus)) {
        if (m.heads % tp != 0 || (m.kv() % tp != 0 && tp % m.kv() != 0)) {
            pruned["tp does not divide the heads"]++;
            continue;
        }
        if (!o.allow_tp_across_nodes && tp > c.gpus_per_node) {
            pruned["tp groups that leave a node (their collectives on the critical path cross the slow link)"]++;
            continue;
        }
        for (int cp : divisors(o.gpus / tp)) {
            if (cp > 1 && m.seq % (2 * cp) != 0) {
                pruned["cp does not split the sequence into 2 cp chunks"]++;
                continue;
            }
            for (int pp : divisors(o.gpus / tp / cp)) {
                const bool uneven_ok =
                    m.family != predict::ModelFamily::engine_gpt && (pp & (pp - 1)) == 0 && m.layers >= 2 * pp;
                if (m.layers % pp != 0 && !uneven_ok) {
                    pruned["pp does not divide the layers"]++;
                    continue;
                }
                const int dp = int(o.gpus / tp / cp / pp);
                for (int ep : divisors(dp)) {
                    if (ep > 1 && (!m.is_moe() || m.moe_experts % ep != 0)) continue;
                    for (int zero = 0; zero <= 3; ++zero) {
                        if (pp > 1 && zero > 1) continue;        // the engine runs ZeRO-2/3 without pipelines
                        if (dp * cp == 1 && zero > 0) continue;  // nothing to shard over
                        for (int mb : o.micro_batches) {
                            if (B > 0 && B % (int64_t(dp) * mb) != 0) {
                                pruned["the global batch does not divide into dp x micro-batch"]++;
                                continue;
                            }
                            const int accum = B > 0 ? int(B / (int64_t(dp) * mb)) : 1;
                            using S = PipelineSchedule;
                            std::vector<std::pair<S, int>> schedules = {{S::one_f_one_b, 1}};
                            if (pp > 1) {
                                pruned["afab (the same bubble as 1f1b, more activations)"]++;
                                if ((m.layers % (2 * pp) == 0 || (uneven_ok && m.layers >= 4 * pp)) && accum % pp == 0)
                                    schedules.push_back({S::interleaved, 2});
                                // the rules the engine and `plan --pp-schedule` share (settings_rules.cpp)
                                if (m.is_moe())
                                    pruned["zb1 with mixture-of-experts blocks (the engine refuses it)"]++;
                                else
                                    schedules.push_back({S::zb1, 1});
                            }
                            for (const auto& [schedule, chunks] : schedules)
                                for (const Recompute rc : o.recompute) {
                                    if (schedule == S::zb1 && rc == Recompute::full) continue;
                                    if (o.flash &&
                                        rc == Recompute::selective) {  // nothing left to drop: the same as none
                                        pruned["selective recomputation with flash attention (the same as none)"]++;
                                        continue;
                                    }
                                    // Context parallelism both ways: the ring hides its transfers behind the
                                    // attention, the all-gather sends one fp32 gradient block fewer per layer.
                                    for (const CpComm cp_comm : {CpComm::ring, CpComm::allgather}) {
                                        if (cp == 1 && cp_comm == CpComm::allgather) continue;
                                        predict::Layout l;
                                        ParallelLayout& p = l.parallel;
                                        p.dp = dp, p.tp = tp, p.pp = pp, p.cp = cp, p.ep = ep, p.sp = tp > 1;
                                        p.pp_schedule = schedule, p.pp_chunks = chunks, p.zero = zero;
                                        l.micro_batch = mb, l.grad_accum = accum, l.recompute = rc, l.bf16 = o.bf16;
                                        l.flash = o.flash;
                                        p.cp_comm = cp_comm;
                                        consider(l);
                                    }
                                }
                        }
                    }
                }
            }
        }
    }
    for (EvaluatedLayout& e : evaluate_layouts(m, c, o.gpus, layouts, {o.threads, o.share_work})) {
        if (e.refused) {
            pruned["refused by the settings rules (ultrascope plan with its flags says why)"]++;
            continue;
        }
        out.ranked.push_back(std::move(e.result));
        ++out.considered;
    }
    for (const auto& [why, n] : pruned) out.pruned.push_back(fmt::format("{} x {}", n, why));
    std::stable_sort(out.ranked.begin(), out.ranked.end(),
                     [](const predict::PlanResult& a, const predict::PlanResult& b) {
                         if (a.fits != b.fits) return a.fits;
                         return a.time.step_s < b.time.step_s;
                     });
    if (!out.ranked.empty() && out.ranked.front().fits) {
        const predict::PlanResult best = out.ranked.front();
        for (size_t i = 0; i < out.ranked.size(); ++i) {
            predict::PlanResult& r = out.ranked[i];
            if (i == 0)
                r.verdict = "best";
            else if (r.fits)
                r.verdict = why_slower(r, best);
        }
    }
    return out;
}

}  // namespace us::plan
