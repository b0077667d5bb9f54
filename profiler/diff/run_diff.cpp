// B's steady step minus A's, split into causes that add up to it (run_diff.h, docs/diff.md).
#include "profiler/diff/run_diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <cmath>
#include <set>

#include "common/core/check.h"
#include "profiler/analysis/core_sharing.h"
#include "profiler/diff/diff_load.h"
#include "profiler/diff/memory_peaks.h"

namespace us::prof {

namespace {

constexpr double kMs = 1e3;
constexpr size_t kEvidenceOps = 5;
constexpr double kNoiseFloor = 0.005;

// The matched B rank whose figure moved most in the direction of `sign` (B minus A).
template <typename Figure>
std::optional<int> rank_moved_most(const RunFigures& a, const RunFigures& b, const RankAlignment& al, double sign,
                                   Figure figure) {
    std::optional<int> best;
    double most = 0;
    for (const RankPair& p : al.pairs) {
        const double moved = sign * (figure(b.ranks[p.b].step) - figure(a.ranks[p.a].step));
        if (moved > most) most = moved, best = b.ranks[p.b].rank;
    }
    return best;
}

// `w` held between 0 and `e`: the part of a change in exposed time `e` that a change in waiting `w` accounts for.
double part_of(double w, double e) { return e >= 0 ? std::clamp(w, 0.0, e) : std::clamp(w, e, 0.0); }

CauseOp cause_op(const AlignedOp& o) { return {o.name, kOpMatchNames[int(o.match)], kMs * o.a_s, kMs * o.b_s}; }

struct Builder {
    const RunFigures& a;
    const RunFigures& b;
    const RankAlignment& al;
    const std::vector<AlignedOp>& ops;
    std::vector<Cause> causes;

    void add(Cause c) {
        if (std::abs(c.ms) > 1e-9) causes.push_back(std::move(c));
    }

    // Per compute kind, its self time's change less what ops new in B (gone from A) brought, then those ops. A kind
    // with ops both new and gone had its implementation replaced (naive attention by flash): its new and gone ops
    // stay in it, as its evidence.
    void compute() {
        std::array<bool, kComputeKindCount> added{}, removed{}, replaced{};
        for (const AlignedOp& o : ops)
            added[size_t(o.kind)] |= o.match == OpMatch::new_in_b,
                removed[size_t(o.kind)] |= o.match == OpMatch::gone_from_a;
        for (int k = 0; k < kComputeKindCount; ++k) replaced[k] = added[k] && removed[k];
        std::array<double, kComputeKindCount> fresh{};
        Cause new_ops{CauseKind::new_ops, "", 0, "measured"};
        for (const AlignedOp& o : ops) {
            if ((o.match != OpMatch::new_in_b && o.match != OpMatch::gone_from_a) || replaced[size_t(o.kind)]) continue;
            fresh[size_t(o.kind)] += o.delta_s();
            new_ops.ms += kMs * o.delta_s();
            new_ops.ops.push_back(cause_op(o));
        }
        for (int k = 0; k < kComputeKindCount; ++k) {
            const double ms = kMs * (b.mean.kind_self_s[k] - a.mean.kind_self_s[k] - fresh[k]);
            Cause c{CauseKind::compute, std::string(kComputeKindNames[k]), ms, "measured"};
            std::vector<const AlignedOp*> moved;
            for (const AlignedOp& o : ops)
                if (int(o.kind) == k && std::abs(o.delta_s()) > 0 &&
                    (o.match == OpMatch::both || (replaced[k] && o.match != OpMatch::unknown)))
                    moved.push_back(&o);
            std::sort(moved.begin(), moved.end(), [](const AlignedOp* x, const AlignedOp* y) {
                return std::abs(x->delta_s()) > std::abs(y->delta_s());
            });
            for (size_t i = 0; i < moved.size() && i < kEvidenceOps; ++i) c.ops.push_back(cause_op(*moved[i]));
            c.rank = rank_moved_most(a, b, al, ms, [k](const StepFigures& f) { return f.kind_self_s[k]; });
            c.evidence = fmt::format("{} ops' self time {:.2f} -> {:.2f} ms per step (the ranks' mean){}",
                                     kComputeKindNames[k], kMs * a.mean.kind_self_s[k], kMs * b.mean.kind_self_s[k],
                                     std::abs(fresh[k]) >= 5e-6
                                         ? fmt::format(", of which {:+.2f} ms in ops new in B or gone from A, a cause "
                                                       "of their own",
                                                       kMs * fresh[k])
                                         : std::string());
            add(std::move(c));
        }
        std::sort(new_ops.ops.begin(), new_ops.ops.end(), [](const CauseOp& x, const CauseOp& y) {
            return std::abs(x.b_ms - x.a_ms) > std::abs(y.b_ms - y.a_ms);
        });
        if (new_ops.ops.size() > 2 * kEvidenceOps) new_ops.ops.resize(2 * kEvidenceOps);
        new_ops.evidence = "ops in only one run's op tables: new in B, or gone from A";
        new_ops.rank = rank_moved_most(a, b, al, new_ops.ms, [](const StepFigures& f) { return f.compute_s; });
        add(std::move(new_ops));
    }

    // The run whose straggler the change is: "B's rank 5 arrived last in 7 of 9" (A's, where the waiting fell).
    void straggler_evidence(Cause& c, const Blame& a_blame, const Blame& b_blame) const {
        const bool in_b = names_straggler(b_blame) && (c.ms >= 0 || !names_straggler(a_blame));
        const Blame& blame = in_b ? b_blame : a_blame;
        if (!names_straggler(blame)) return;
        const Straggler& s = blame.stragglers.front();
        c.rank = s.rank, c.group = s.group;
        c.evidence = fmt::format(
            "{}'s rank {} arrived last in {} of {} collectives of {}, and blame names it as holding the run back; "
            "waiting inside collectives {:.2f} -> {:.2f} ms per step (the ranks' mean){}",
            in_b ? "B" : "A", s.rank, s.last_arrivals, s.collectives, s.group, kMs * a.mean.waits_s,
            kMs * b.mean.waits_s,
            names_straggler(a_blame) && names_straggler(b_blame) ? ""
                                                                 : fmt::format("; {} names none", in_b ? "A" : "B"));
    }

    // Exposed communication per group, less the part that is waiting for a straggler: the change of waiting where
    // both runs' blame names one; where only B's does, the waiting B gained (B's straggler); where only A's does,
    // the waiting B lost (A's straggler gone); none where neither names one (the runs wait as their collectives go:
    // that is communication).
    void communication(const Blame& a_blame, const Blame& b_blame) {
        const bool in_a = names_straggler(a_blame), in_b = names_straggler(b_blame);
        auto straggler_part = [&](double dw) {
            return in_a && in_b ? dw : in_b ? std::max(0.0, dw) : in_a ? std::min(0.0, dw) : 0.0;
        };
        Cause straggler{CauseKind::straggler, "", 0, "derived"};
        double a_rest = a.mean.exposed_s, b_rest = b.mean.exposed_s, aw_rest = a.mean.waits_s, bw_rest = b.mean.waits_s;
        auto group_cause = [&](std::string name, double de, double dw) {
            const double s = part_of(dw, de);
            straggler.ms += kMs * s;
            Cause c{CauseKind::exposed_comm, name, kMs * (de - s), "measured", name};
            c.evidence =
                fmt::format("exposed {} communication {:+.2f} ms per step (the ranks' mean){}", name, kMs * de,
                            s != 0 ? fmt::format(", of which {:+.2f} ms waiting for a straggler", kMs * s) : "");
            c.rank = rank_moved_most(a, b, al, c.ms, [](const StepFigures& f) { return f.exposed_s; });
            add(std::move(c));
        };
        for (int g = 0; g < kGroupCount; ++g) {
            const double de = b.mean.group_exposed_s[g] - a.mean.group_exposed_s[g];
            const double dw = straggler_part(b.mean.group_waits_s[g] - a.mean.group_waits_s[g]);
            a_rest -= a.mean.group_exposed_s[g], b_rest -= b.mean.group_exposed_s[g];
            aw_rest -= a.mean.group_waits_s[g], bw_rest -= b.mean.group_waits_s[g];
            group_cause(std::string(kGroupKinds[g].name), de, dw);
        }
        // An imported run's groups (and communication the engine's groups do not hold) are not told apart.
        group_cause("other groups", b_rest - a_rest, straggler_part(bw_rest - aw_rest));
        straggler_evidence(straggler, a_blame, b_blame);
        add(std::move(straggler));
    }

    // Idle: the pipeline's bubble (where either run has a pipeline: elsewhere the idle between a step's first and
    // last op is a data-parallel wait or the host's, not a bubble), and the rest (the host's, on a GPU: launches,
    // the data loader, syncs).
    void idle(bool pipelined) {
        if (pipelined) {
            Cause bubble{CauseKind::bubble, "pipeline", kMs * (b.mean.bubble_s - a.mean.bubble_s), "measured"};
            bubble.evidence = fmt::format(
                "idle between the step's first and last op (waits in the embedding all-reduce for another stage "
                "included) {:.2f} -> {:.2f} ms per step",
                kMs * a.mean.bubble_s, kMs * b.mean.bubble_s);
            bubble.rank = rank_moved_most(a, b, al, bubble.ms, [](const StepFigures& f) { return f.bubble_s; });
            add(std::move(bubble));
        }
        const bool host = a.device && b.device;
        auto rest = [pipelined](const StepFigures& f) { return f.idle_s - (pipelined ? f.bubble_s : 0.0); };
        Cause c{host ? CauseKind::host : CauseKind::idle, "", kMs * (rest(b.mean) - rest(a.mean)), "measured"};
        c.evidence = fmt::format("{} {:.2f} -> {:.2f} ms per step (neither compute nor communication{})",
                                 host ? "the device idle (host overhead)" : "idle", kMs * rest(a.mean),
                                 kMs * rest(b.mean), host ? ": the host launching, loading, syncing" : "");
        c.rank = rank_moved_most(a, b, al, c.ms, rest);
        add(std::move(c));
    }
};

// The categories in the engine's order, any other name after them, the peak of the sum last; a row where both runs
// held nothing is left out. A side without peaks is unknown in every row; a side with peaks held 0 B of a category
// it lacks.
std::vector<MemoryRow> memory_rows(const DiffSide& a, const DiffSide& b) {
    std::vector<std::string> names;
    for (const auto& n : kMemCategoryNames) names.emplace_back(n);
    for (const auto* side : {&a, &b})
        for (const auto& [k, v] : side->memory_peaks)
            if (std::find(names.begin(), names.end(), k) == names.end() && k != kPeakOfSum) names.push_back(k);
    names.push_back(kPeakOfSum);
    auto bytes_of = [](const DiffSide& side, const std::string& n) -> std::optional<int64_t> {
        if (side.memory_peaks.empty()) return std::nullopt;
        const auto it = side.memory_peaks.find(n);
        return it == side.memory_peaks.end() ? 0 : it->second;
    };
    std::vector<MemoryRow> out;
    for (const std::string& n : names) {
        MemoryRow row{n, bytes_of(a, n), bytes_of(b, n)};
        if (row.a_bytes.value_or(0) == 0 && row.b_bytes.value_or(0) == 0) continue;
        out.push_back(row);
    }
    return out;
}

std::vector<RankDelta> rank_deltas(const RunFigures& a, const RunFigures& b, const RankAlignment& al) {
    std::vector<RankDelta> out;
    for (const RankPair& p : al.pairs) {
        const StepFigures &x = a.ranks[p.a].step, &y = b.ranks[p.b].step;
        out.push_back({a.ranks[p.a].rank, b.ranks[p.b].rank, b.ranks[p.b].label, kMs * x.wall_s, kMs * y.wall_s,
                       kMs * (y.compute_s - x.compute_s), kMs * (y.exposed_s - x.exposed_s),
                       kMs * (y.idle_s - x.idle_s)});
    }
    auto moved = [](const RankDelta& r) {
        return std::abs(r.compute_ms) + std::abs(r.exposed_ms) + std::abs(r.idle_ms);
    };
    std::stable_sort(out.begin(), out.end(),
                     [&](const RankDelta& x, const RankDelta& y) { return moved(x) > moved(y); });
    if (out.size() > RunDiff::kMaxRanks) out.resize(RunDiff::kMaxRanks);
    return out;
}

// Whose settings repeat `r` runs again: A's (also where A and B share them) or B's. One of unknown settings (an
// imported run) is taken as A's, said in the notes; one whose settings are known and are neither's is refused.
char repeat_of(RunDiff& d, const DiffSide& a, const DiffSide& b, const DiffSide& r, const std::string& what) {
    if (!settings_known(r.settings)) {
        // A run of this engine, whose settings are known, is repeated only by one whose settings say it is the
        // same (an imported trace is another job); and any repeat has A's rank count.
        US_CHECK_INPUT(!settings_known(a.settings),
                       "{}: its settings are not known (an imported trace), and A is a run of this engine: give a run "
                       "of A's (or B's) settings again as the repeat",
                       what);
        const size_t ranks = r.run->digests.size(), a_ranks = a.run->digests.size();
        US_CHECK_INPUT(ranks == a_ranks,
                       "{}: its settings are not known, and it has {} rank(s) where A has {}: a repeat is a run of A's "
                       "(or B's) settings again, to measure how far this machine moves between runs",
                       what, ranks, a_ranks);
        d.notes.push_back(what + ": its settings are not known: taken as a run of A's settings");
        return 'A';
    }
    std::vector<SettingChange> from_a, from_b;
    if (settings_known(a.settings) && (from_a = setting_changes(a.settings, r.settings, "A's settings", what)).empty())
        return 'A';
    if (settings_known(b.settings) && (from_b = setting_changes(b.settings, r.settings, "B's settings", what)).empty())
        return 'B';
    if (!settings_known(a.settings)) {
        d.notes.push_back(what + ": A's settings are not known: taken as a run of A's settings");
        return 'A';
    }
    const bool b_differs = settings_known(b.settings) && !setting_changes(a.settings, b.settings, "A's", "B's").empty();
    fail_user(
        "{}: not a run of A's settings ({}){}: a repeat is A's or B's settings run again, to measure how far the "
        "machine moves between runs",
        what, describe_changes(from_a),
        b_differs ? fmt::format(" nor of B's ({})", describe_changes(from_b)) : std::string());
}

// The steps of A and of its repeats (runs of A's settings again), and of B and of its: the larger range is how far
// the machine moves between whole runs, which the runs' own step spreads do not hold.
void add_repeats(RunDiff& d, const DiffSide& a, const DiffSide& b, const std::vector<DiffSide>& repeats) {
    if (repeats.empty()) return;
    std::map<char, std::pair<double, double>> range = {{'A', {d.a_step_ms, d.a_step_ms}},
                                                       {'B', {d.b_step_ms, d.b_step_ms}}};
    std::map<char, int> count;
    for (const DiffSide& r : repeats) {
        const std::string what = "repeat (" + r.name + ")";
        const char of = repeat_of(d, a, b, r, what);
        const RunFigures f = run_figures(*r.run, what);
        d.repeats.push_back({r.name, kMs * f.mean.wall_s, of});
        ++count[of];
        auto& [lo, hi] = range[of];
        lo = std::min(lo, d.repeats.back().step_ms), hi = std::max(hi, d.repeats.back().step_ms);
    }
    const double a_range = range['A'].second - range['A'].first, b_range = range['B'].second - range['B'].first;
    // the side whose runs moved more; on a tie, one that has repeats
    d.noise_between_of = b_range > a_range || (b_range == a_range && count['A'] == 0) ? 'B' : 'A';
    d.noise_between_ms = std::max(a_range, b_range);
}

}  // namespace

std::string cause_title(const Cause& c);  // diff_text.cpp

std::string noise_words(const RunDiff& d) {
    if (!d.noise_between_ms || *d.noise_between_ms < d.noise_within_ms) return "the runs' own step spread";
    return fmt::format("the spread between runs of {}'s settings", d.noise_between_of);
}

std::string diff_verdict(const RunDiff& d) {
    const double pct = d.a_step_ms > 0 ? 100.0 * d.delta_ms / d.a_step_ms : 0.0;
    const std::string work = d.work ? work_words(*d.work) : "";
    if (d.within_noise && std::abs(d.delta_ms) > d.noise_ms)
        return fmt::format(
            "B does not differ from A beyond noise: its step is {:+.2f} ms ({:+.1f}%), under {:.1f}% of A's step "
            "({}: {:.2f} ms, derived from the measured steps){}",
            d.delta_ms, pct, 100 * kNoiseFloor, noise_words(d), d.noise_ms, work);
    if (d.within_noise)
        return fmt::format(
            "B does not differ from A beyond noise: its step is {:+.2f} ms ({:+.1f}%), within {} of {:.2f} ms "
            "(derived from the measured steps){}",
            d.delta_ms, pct, noise_words(d), d.noise_ms, work);
    std::string s =
        fmt::format("B is {:.2f} ms ({:.1f}%) {} per step ({:.2f} -> {:.2f} ms, measured){}", std::abs(d.delta_ms),
                    std::abs(pct), d.delta_ms > 0 ? "slower" : "faster", d.a_step_ms, d.b_step_ms, work);
    for (size_t i = 0; i < d.causes.size() && i < 3; ++i)
        s += fmt::format("{} {:+.2f} ms {}", i ? "," : ":", d.causes[i].ms, cause_title(d.causes[i]));
    if (std::abs(d.unexplained_ms) >= 0.01) s += fmt::format("; {:+.2f} ms unexplained", d.unexplained_ms);
    return s + load_clause(d);
}

RunDiff diff_runs(const DiffSide& a, const DiffSide& b, const std::vector<DiffSide>& repeats) {
    const RunFigures fa = run_figures(*a.run, "A (" + a.name + ")"), fb = run_figures(*b.run, "B (" + b.name + ")");
    const RankAlignment al = align_ranks(fa, fb);
    const std::vector<AlignedOp> ops = align_ops(fa, fb);
    RunDiff d;
    d.a_name = a.name, d.b_name = b.name;
    d.a_ranks = int(fa.ranks.size()), d.b_ranks = int(fb.ranks.size());
    d.a_steps = fa.steady_steps, d.b_steps = fb.steady_steps;
    d.a_step_ms = kMs * fa.mean.wall_s, d.b_step_ms = kMs * fb.mean.wall_s, d.delta_ms = d.b_step_ms - d.a_step_ms;
    for (auto [side, figures] : {std::pair{&d.a_comm, &fa.mean}, std::pair{&d.b_comm, &fb.mean}})
        *side = {kMs * figures->comm_s, kMs * figures->overlapped_s, figures->collectives, figures->collective_bytes,
                 figures->sized_collectives};
    d.noise_within_ms = kMs * std::max(fa.noise_s, fb.noise_s);
    add_repeats(d, a, b, repeats);
    d.noise_ms = std::max(d.noise_within_ms, d.noise_between_ms.value_or(0.0));
    if (settings_known(a.settings) && settings_known(b.settings))
        d.settings = setting_changes(a.settings, b.settings, "A's settings", "B's settings");
    d.work = work_per_step(a.settings, b.settings, d.a_step_ms, d.b_step_ms);
    auto core_wait = [](const RunFigures& f) {
        return RunDiff::CoreWait{
            kMs * f.core_wait_s,   kMs * f.core_wait_most_s,
            f.core_wait_most_rank, f.worker_core_wait_s >= 0 ? kMs * f.worker_core_wait_s : -1,
            f.core_wait_share,     f.core_wait_most_cpu_s >= 0 ? kMs * f.core_wait_most_cpu_s : -1};
    };
    d.a_oversubscribed = oversubscribed_words(a.run->core_sharing);
    d.b_oversubscribed = oversubscribed_words(b.run->core_sharing);
    if (fa.core_wait_s >= 0) d.a_core_wait = core_wait(fa);
    if (fb.core_wait_s >= 0) d.b_core_wait = core_wait(fb);
    for (double w : fa.step_walls_s) d.a_steps_ms.push_back(kMs * w);
    for (double w : fb.step_walls_s) d.b_steps_ms.push_back(kMs * w);
    // A change under kNoiseFloor of the step is never called one (runs without spread: synthetic, or one step).
    d.within_noise = std::abs(d.delta_ms) <= std::max(d.noise_ms, kNoiseFloor * d.a_step_ms);
    Builder builder{fa, fb, al, ops, {}};
    builder.compute();
    builder.communication(a.run->blame, b.run->blame);
    builder.idle(!a.run->pipelines.empty() || !b.run->pipelines.empty());
    d.causes = std::move(builder.causes);
    std::stable_sort(d.causes.begin(), d.causes.end(),
                     [](const Cause& x, const Cause& y) { return std::abs(x.ms) > std::abs(y.ms); });
    double sum = 0;
    for (const Cause& c : d.causes) sum += c.ms;
    d.unexplained_ms = d.delta_ms - sum;
    d.what_if = what_if(fa, fb, b.run->blame);
    d.memory = memory_rows(a, b);
    d.ranks_by = al.by, d.a_only = al.a_only, d.b_only = al.b_only, d.ranks = rank_deltas(fa, fb, al);
    for (const std::string& n : fa.notes) d.notes.push_back("A: " + n);
    for (const std::string& n : fb.notes) d.notes.push_back("B: " + n);
    if (d.a_ranks != d.b_ranks)
        d.notes.push_back(fmt::format("A has {} ranks, B {}: compared at the ranks' mean step and per group kind",
                                      d.a_ranks, d.b_ranks));
    const auto unknown =
        std::count_if(ops.begin(), ops.end(), [](const AlignedOp& o) { return o.match == OpMatch::unknown; });
    if (unknown > 0)
        d.notes.push_back(
            fmt::format("{} ops lead one run's op tables but not the other's, which keep only their "
                        "leading rows: counted in their kind, not named as new or gone",
                        unknown));
    if (d.memory.empty()) d.notes.push_back("memory: neither run's peaks per category are known here");
    d.verdict = diff_verdict(d);
    return d;
}

}  // namespace us::prof
