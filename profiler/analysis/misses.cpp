#include "profiler/analysis/misses.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "common/core/format.h"
#include "profiler/analysis/report.h"

namespace us::prof {

namespace {

bool differs(double measured, double expected) {
    if (measured == expected) return false;
    if (expected == 0) return true;
    return std::abs(measured / expected - 1.0) > kMissTolerance;
}

bool agrees(double measured, std::optional<double> predicted) { return predicted && !differs(measured, *predicted); }

// The largest departure from uniform routing among a rank's layers (1: uniform), 0 when not measured.
double most_uneven(const RankReport& r) {
    double most = 0;
    for (double load : r.expert_load) most = std::max(most, std::max(load, load > 0 ? 1.0 / load : 0.0));
    return most;
}

// Why the textbook's figure for a memory category is not the engine's, where the docs say so; only when the
// engine's exact walk agrees with the measurement (otherwise the run itself is unexplained).
std::optional<std::string> memory_formula_explanation(const Report& rep, const RankReport& r, MemCategory k,
                                                      double measured) {
    const predict::PredictInput& in = rep.predict_input;
    const auto& pred = r.predicted.memory[size_t(k)];
    if (!agrees(measured, pred ? std::optional<double>(double(*pred)) : std::nullopt)) return std::nullopt;
    if (k == MemCategory::activations)
        return fmt::format(
            "the textbook (Korthikanti et al.) counts {}-byte activations with dropout masks and "
            "nothing outside the blocks; this engine has no dropout, keeps fp32 LayerNorm statistics, "
            "the embedding output, the logits and the losses (docs/memory.md); the exact walk agrees "
            "with the measurement",
            in.bf16 ? 2 : 4);
    const bool sharded =
        (k == MemCategory::params && in.parallel.zero >= 3) || (k == MemCategory::grads && in.parallel.zero >= 2) ||
        ((k == MemCategory::master_params || k == MemCategory::optimizer_state) && in.parallel.zero >= 1);
    if (sharded && in.parallel.ep > 1 && r.predicted.expert_params_on_rank > 0)
        return std::string(
            "the textbook shards every parameter over dp x cp; the experts' are sharded over the "
            "dp/ep ranks that hold the same experts (docs/formulas.md); the exact walk agrees");
    if (sharded)
        return std::string(
            "under ZeRO the engine's shards are whole tensors split at bucket boundaries, not "
            "parameters / dp (docs/memory.md); the exact walk agrees");
    return std::nullopt;
}

std::optional<std::string> comm_explanation(const Report& rep, const RankReport& r, GroupKind group,
                                            const std::string& source, double measured) {
    const predict::PredictInput& in = rep.predict_input;
    if (group == GroupKind::ep && in.moe_experts > 0) {
        const double uneven = most_uneven(r);
        if (uneven > 1.0 + kMissTolerance)
            return fmt::format(
                "the all-to-alls carry the rows the router sends: the figure assumes uniform routing, "
                "and this rank's experts received up to {:.2f}x (or 1/{:.2f}) their uniform share",
                uneven, uneven);
    }
    if (source != "formula") return std::nullopt;
    const double exact = double(r.predicted.comm_bytes[size_t(group)]);
    if (!agrees(measured, exact)) return std::nullopt;
    if (group == GroupKind::tp)
        return fmt::format(
            "the textbook counts the blocks' 4 all-reduces of s b h per micro-batch; the engine also "
            "reduces at the embedding and the head{}{} (docs/formulas.md); the exact walk agrees",
            in.parallel.sp ? ", and gathers the LayerNorm outputs again for the weight gradients" : "",
            in.recompute == Recompute::full ? ", and repeats the forward's under full recomputation" : "");
    if (group == GroupKind::ep)
        return fmt::format(
            "the textbook counts 4 all-to-alls per MoE block and micro-batch; the engine also sends "
            "the row counts{}; the exact walk agrees",
            in.recompute == Recompute::full ? " and repeats the forward's under full recomputation" : "");
    return std::nullopt;
}

// The steady steps' mean compute per step of each pipeline stage (the mean over its ranks), by stage.
std::map<int, double> stage_compute_per_step(const Report& rep) {
    std::map<int, std::pair<double, int>> sums;
    for (const RankReport& r : rep.ranks) {
        const size_t steps = steady_step_count(r.steps);
        if (steps == 0 || r.steady.compute_s <= 0) continue;
        auto& [seconds, ranks] = sums[r.coords.pp.value_or(0)];
        seconds += r.steady.compute_s / double(steps), ++ranks;
    }
    std::map<int, double> out;
    for (const auto& [stage, sum] : sums) out[stage] = sum.first / sum.second;
    return out;
}

// The host's gaps between the busiest stage's ops per steady step, which the simulation leaves out: the median gap
// between consecutive compute intervals (a pipeline wait is one of a few long gaps, a host gap one of many short
// ones) times the number of gaps, averaged over the steps.
struct HostGaps {
    double median_s = 0, per_step_s = 0;
    size_t per_step = 0;
};
HostGaps host_gaps(const std::vector<StepBreakdown>& steady) {
    std::vector<int64_t> gaps;
    for (const StepBreakdown& s : steady)
        for (size_t i = 1; i < s.compute_set.size(); ++i)
            gaps.push_back(s.compute_set[i].first - s.compute_set[i - 1].second);
    HostGaps h;
    if (gaps.empty() || steady.empty()) return h;
    std::nth_element(gaps.begin(), gaps.begin() + long(gaps.size() / 2), gaps.end());
    h.median_s = double(gaps[gaps.size() / 2]) * 1e-9;
    h.per_step = gaps.size() / steady.size();
    h.per_step_s = h.median_s * double(gaps.size()) / double(steady.size());
    return h;
}

// A bubble miss is explained only by evidence in the run itself; the simulation and the formula give every stage
// the same compute (a backward twice a forward), no time between ops and instant transfers. In order: (1) one
// steady step: the run is too short to judge; (2) a noisy run: the busiest stage's steady steps' compute varies
// by more than the tolerance, or their bubbles range over the expected figure; (3) a bubble below the figure with
// stages whose measured compute per step differs by more than the tolerance (the busiest stage waits less for
// lighter ones); (4) a bubble above it by no more than the host's gaps between the busiest stage's ops
// (host_gaps), (5) or than its time with a pipeline transfer outstanding beyond the figure's idle, (6) or than the
// time a stage's thread waited for a core (the machine's other load). Otherwise the schedule ran unlike its model
// on a quiet machine: unexplained. Before (2): a run that gives a machine more compute threads than cores breaks
// the model's premise, a processor per stage (core_sharing.h): its ranks take turns on the cores.
std::optional<std::string> bubble_explanation(const Report& rep, double measured, double expected) {
    const RankReport* busiest = nullptr;
    for (const RankReport& r : rep.ranks)
        if (r.rank == rep.pipeline.busiest_rank) busiest = &r;
    if (!busiest) return std::nullopt;
    const std::vector<StepBreakdown> steady = steady_steps(busiest->steps);
    if (steady.size() < 2)
        return std::string(
            "one steady step: the run is too short to tell the model's error from the machine's noise (run more "
            "--steps)");
    if (const std::string shared = oversubscribed_words(rep.cross.core_sharing); !shared.empty())
        return fmt::format(
            "{}: the stages take turns on the cores, while the simulation and the formula give each its own "
            "processor (compare with a run of fewer ranks or --threads, on more cores)",
            shared);
    double least_c = 1e300, most_c = 0, least_b = 1e300, most_b = -1e300;
    for (const StepBreakdown& s : steady) {
        least_c = std::min(least_c, s.compute_s), most_c = std::max(most_c, s.compute_s);
        least_b = std::min(least_b, s.bubble_fraction), most_b = std::max(most_b, s.bubble_fraction);
    }
    if (least_c > 0 && most_c / least_c > 1.0 + kMissTolerance)
        return fmt::format(
            "a noisy run: the busiest stage's compute per step ranged from {:.4f} to {:.4f} s over {} steady steps "
            "(x{:.2f}), so its idle time is the machine's other load as much as the schedule's",
            least_c, most_c, steady.size(), most_c / least_c);
    if (expected >= least_b && expected <= most_b)
        return fmt::format(
            "a noisy run: the busiest stage's bubble ranged from {:.3f} to {:.3f} over {} steady steps, which "
            "includes the expected {:.3f}",
            least_b, most_b, steady.size(), expected);
    const std::map<int, double> stages = stage_compute_per_step(rep);
    if (measured < expected && stages.size() >= 2) {
        const auto [lo, hi] = std::minmax_element(stages.begin(), stages.end(),
                                                  [](const auto& a, const auto& b) { return a.second < b.second; });
        if (lo->second > 0 && hi->second / lo->second > 1.0 + kMissTolerance)
            return fmt::format(
                "the stages are unequal: stage {} computes {:.4f} s per step, stage {} {:.4f} s (x{:.2f}), and the "
                "busiest waits less for lighter stages than the {} schedule's equal ones",
                hi->first, hi->second, lo->first, lo->second, hi->second / lo->second,
                schedule_name(rep.predict_input.parallel.pp_schedule));
    }
    const double compute_per_step = busiest->steady.compute_s / double(steady.size());
    const double excess_s = (measured - expected) * compute_per_step;
    const HostGaps gaps = host_gaps(steady);
    if (excess_s > 0 && gaps.per_step_s >= excess_s)
        return fmt::format(
            "the host's gaps between ops: the busiest stage's {} gaps per step (median {:.1f} us) add {:.4f} s per "
            "step that the simulation leaves out, at least the {:.4f} s its bubble exceeds the figure",
            gaps.per_step, gaps.median_s * 1e6, gaps.per_step_s, excess_s);
    // (5) The transfers: time with a pipeline transfer outstanding beyond the figure's own idle covers the excess.
    // An upper bound: a receive outstanding is a slow transfer or a wait for a neighbour alike, so a schedule
    // modelled wrong whose stage waits on a receive reads as this too (the report says which evidence it used).
    const double p2p_per_step = busiest->steady.p2p_s / double(steady.size());
    if (excess_s > 0 && p2p_per_step - expected * compute_per_step >= excess_s)
        return fmt::format(
            "the transfers, at most: the busiest stage had a pipeline transfer outstanding {:.4f} s per step, "
            "beyond the figure's idle by at least the {:.4f} s its bubble exceeds it, and the simulation's "
            "transfers are instant (an upper bound: a slow transfer and a wait for a neighbour look alike)",
            p2p_per_step, excess_s);
    // (6) The machine's other load: a stage's thread ready but without a core, at least the excess per step. Any
    // stage's counts (one descheduled stage holds the others); an upper bound too, as part of it may fall inside
    // ops, which then take longer rather than leave idle time.
    const RankReport* waited = nullptr;
    for (const RankReport& r : rep.ranks)
        if (!waited || r.runqueue_wait_s > waited->runqueue_wait_s) waited = &r;
    const double waited_per_step = waited->runqueue_wait_s / double(steady.size());
    if (excess_s > 0 && waited_per_step >= excess_s)
        return fmt::format(
            "the machine's other load, at most: rank {}'s thread waited {:.4f} s per step for a core (the kernel's "
            "run queue, measured), at least the {:.4f} s the bubble exceeds the figure (an upper bound: part of it "
            "may fall inside ops)",
            waited->rank, waited_per_step, excess_s);
    return std::nullopt;
}

}  // namespace

double Miss::ratio() const { return predicted != 0 ? measured / predicted : std::numeric_limits<double>::infinity(); }

std::vector<Miss> find_misses(const Report& rep) {
    std::vector<Miss> out;
    if (rep.is_predicted()) return out;  // a planner's prediction has nothing measured
    auto add = [&](std::string what, int rank, double measured, double expected, const char* source,
                   std::optional<std::string> why) {
        if (differs(measured, expected))
            out.push_back({std::move(what), rank, measured, expected, source, std::move(why)});
    };
    for (const RankReport& r : rep.ranks) {
        if (r.steps.empty()) continue;  // nothing complete to compare yet
        for (int k = 0; k < kMemCategoryCount; ++k) {
            const auto cat = MemCategory(k);
            const double measured = double(r.memory.peak[size_t(k)]);
            const std::string what = "memory." + std::string(kMemCategoryNames[size_t(k)]);
            if (const auto& p = r.predicted.memory[size_t(k)]) {
                std::optional<std::string> why;
                const bool routed = cat == MemCategory::activations || cat == MemCategory::temporaries;
                if (routed && rep.predict_input.moe_experts > 0 && rep.predict_input.moe_capacity_factor > 0)
                    why =
                        "with a capacity factor an expert keeps at most its capacity of rows and drops the rest: "
                        "the rows held follow the routing, the prediction takes it as uniform";
                add(what, r.rank, measured, double(*p), "predicted", why);
            }
            if (const auto& f = r.predicted.memory_formula[size_t(k)])
                add(what, r.rank, measured, double(*f), "formula", memory_formula_explanation(rep, r, cat, measured));
        }
        if (steady_step_count(r.steps) == 0) continue;
        const size_t steps = steady_step_count(r.steps);
        for (int g = 0; g < kGroupCount; ++g) {
            const GroupKind group = GroupKind(g);
            const double measured = r.steady.group_bytes[size_t(g)] / double(steps);
            const double predicted = double(r.predicted.comm_bytes[size_t(g)]);
            const std::string what = "comm." + std::string(group_kind_name(group));
            add(what, r.rank, measured, predicted, "predicted", comm_explanation(rep, r, group, "predicted", measured));
            const double formula = group == GroupKind::tp   ? double(r.predicted.tp_comm_bytes_formula)
                                   : group == GroupKind::ep ? double(r.predicted.ep_comm_bytes_formula)
                                                            : -1;
            if (formula > 0)
                add(what, r.rank, measured, formula, "formula", comm_explanation(rep, r, group, "formula", measured));
        }
    }
    if (rep.predict_input.parallel.pp > 1 && rep.pipeline.busiest_rank >= 0) {
        add("pipeline.bubble", rep.pipeline.busiest_rank, rep.pipeline.measured, rep.pipeline.simulated, "predicted",
            bubble_explanation(rep, rep.pipeline.measured, rep.pipeline.simulated));
        add("pipeline.bubble", rep.pipeline.busiest_rank, rep.pipeline.measured, rep.pipeline.theory, "formula",
            bubble_explanation(rep, rep.pipeline.measured, rep.pipeline.theory));
    }
    return out;
}

std::vector<const Miss*> misses_of(const std::vector<Miss>& misses, const std::string& what, int rank) {
    std::vector<const Miss*> out;
    for (const Miss& m : misses)
        if (m.what == what && m.rank == rank) out.push_back(&m);
    return out;
}

size_t unexplained_count(const std::vector<Miss>& misses) {
    return size_t(std::count_if(misses.begin(), misses.end(), [](const Miss& m) { return !m.explained; }));
}

std::string format_miss(const Miss& m) {
    const bool bytes = m.what.rfind("pipeline.", 0) != 0;
    auto figure = [&](double v) { return bytes ? format_bytes(int64_t(v)) : fmt::format("{:.3f}", v); };
    const std::string ratio = m.predicted != 0 ? fmt::format("x{:.2f}", m.ratio()) : std::string("against 0");
    return fmt::format("rank {} {}: measured {}, {} {} ({}): {}", m.rank, m.what, figure(m.measured), m.source,
                       figure(m.predicted), ratio, m.explained ? *m.explained : "UNEXPLAINED");
}

std::string format_misses(const std::vector<Miss>& misses) {
    if (misses.empty()) return {};
    const size_t unexplained = unexplained_count(misses);
    std::string s = fmt::format(
        "Misses: {} figure(s) differ from the prediction or the formula by more than {:.0f}%"
        " ({} unexplained):\n",
        misses.size(), kMissTolerance * 100, unexplained);
    for (const bool explained : {false, true})
        for (const Miss& m : misses)
            if (bool(m.explained) == explained) s += fmt::format("  {}\n", format_miss(m));
    return s + "\n";
}

nlohmann::json misses_json(const std::vector<Miss>& misses) {
    nlohmann::json out = nlohmann::json::array();
    for (const Miss& m : misses)
        out.push_back({{"what", m.what},
                       {"rank", m.rank},
                       {"measured", m.measured},
                       {"predicted", m.predicted},
                       {"source", m.source},
                       {"ratio", m.predicted != 0 ? nlohmann::json(m.ratio()) : nlohmann::json()},
                       {"explained", m.explained ? nlohmann::json(*m.explained) : nlohmann::json()}});
    return out;
}

}  // namespace us::prof
