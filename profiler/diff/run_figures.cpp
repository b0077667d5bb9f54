// A run's steady step from its digests (run_figures.h).
#include "profiler/diff/run_figures.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/core/check.h"
#include "profiler/analysis/core_wait.h"

namespace us::prof {

void StepFigures::add(const StepFigures& o, double weight) {
    wall_s += weight * o.wall_s, compute_s += weight * o.compute_s, exposed_s += weight * o.exposed_s;
    idle_s += weight * o.idle_s, bubble_s += weight * o.bubble_s, waits_s += weight * o.waits_s;
    comm_s += weight * o.comm_s, overlapped_s += weight * o.overlapped_s;
    collectives += weight * o.collectives, collective_bytes += weight * o.collective_bytes;
    sized_collectives += weight * o.sized_collectives;
    for (size_t g = 0; g < o.group_exposed_s.size(); ++g) {
        group_exposed_s[g] += weight * o.group_exposed_s[g];
        group_waits_s[g] += weight * o.group_waits_s[g];
    }
    for (size_t k = 0; k < o.kind_self_s.size(); ++k) kind_self_s[k] += weight * o.kind_self_s[k];
}

namespace {

RankFigures rank_figures(const RankDigest& d, const std::vector<DigestStep>& steady, const RankWaits& waits) {
    RankFigures r;
    r.rank = d.rank, r.label = d.label, r.coords = d.coords, r.steps = int(steady.size());
    const double w = 1.0 / double(steady.size());
    double moved_s = 0;  // per step: the embedding waits taken into the bubble, out of the blame's waits below
    for (const DigestStep& s : steady) {
        StepFigures f;
        f.wall_s = s.wall_s, f.compute_s = s.compute_s, f.exposed_s = s.exposed_s, f.idle_s = s.idle_s;
        f.comm_s = s.comm_s, f.overlapped_s = s.overlapped_s;
        f.group_exposed_s = s.group_exposed_s;
        double& embedding_exposed = f.group_exposed_s[size_t(GroupKind::embedding)];
        const double moved = std::clamp(s.bubble_waiting_s, 0.0, std::min(embedding_exposed, f.exposed_s));
        f.exposed_s -= moved, embedding_exposed -= moved, f.idle_s += moved;
        f.bubble_s = std::clamp(s.bubble_s, 0.0, std::max(0.0, f.idle_s));
        moved_s += w * moved;
        r.step.add(f, w);
    }
    r.step.kind_self_s = d.kind_self_s;
    for (const DigestCollective& c : d.collectives)
        if (std::any_of(steady.begin(), steady.end(), [&](const DigestStep& s) { return s.step == c.step; }))
            r.step.collectives += w, r.step.collective_bytes += w * double(c.bytes),
                r.step.sized_collectives += c.bytes > 0 ? w : 0;
    // The blame's waits, less the embedding waits taken into the bubble above (never below zero).
    r.step.waits_s = std::max(0.0, waits.all_s * w - moved_s);
    for (size_t g = 0; g < waits.by_group.size(); ++g) r.step.group_waits_s[g] = waits.by_group[g] * w;
    double& embedding_waits = r.step.group_waits_s[size_t(GroupKind::embedding)];
    embedding_waits = std::max(0.0, embedding_waits - moved_s);
    return r;
}

}  // namespace

namespace {

// The run's waits for a core (RunFigures::core_wait_s and the rest), rank by rank: each figure known only where every
// rank's is.
struct CoreWaitTally {
    int ranks = 0;
    double wait_sum = 0, share_sum = 0, workers_sum = 0;
    bool waits_known = true, shares_known = true, workers_known = true;
    double most = -1, most_cpu = -1;
    int most_rank = -1;

    void add(int rank, const CoreTimes& t) {
        ++ranks;
        waits_known = waits_known && t.trainer_wait_s >= 0, wait_sum += t.trainer_wait_s;
        const double share = waiting_share(t.trainer_wait_s, t.trainer_cpu_s);
        shares_known = shares_known && share >= 0, share_sum += share;
        workers_known = workers_known && t.workers_wait_s >= 0, workers_sum += t.workers_wait_s;
        if (t.trainer_wait_s > most) most = t.trainer_wait_s, most_cpu = t.trainer_cpu_s, most_rank = rank;
    }
    void set(RunFigures& run) const {
        if (ranks == 0 || !waits_known) return;
        run.core_wait_s = wait_sum / ranks, run.core_wait_most_s = most, run.core_wait_most_rank = most_rank;
        if (shares_known) run.core_wait_share = share_sum / ranks, run.core_wait_most_cpu_s = most_cpu;
        if (workers_known) run.worker_core_wait_s = workers_sum / ranks;
    }
};

}  // namespace

RunFigures run_figures(const CrossRank& x, const std::string& what) {
    RunFigures run;
    std::vector<double> wall_sum;
    std::vector<int> wall_count;
    CoreWaitTally core_waits;
    for (const RankDigest& d : x.digests) {
        const std::vector<DigestStep> steady = d.steady();
        if (steady.empty()) {
            run.notes.push_back(fmt::format("{}: no steady step, left out", d.label));
            continue;
        }
        run.ranks.push_back(rank_figures(d, steady, x.waits_of(d.rank)));
        core_waits.add(d.rank, d.steady_core_times());
        run.device = run.device || d.device;
        run.ops_complete = run.ops_complete && d.ops_complete;
        run.steady_steps = std::max(run.steady_steps, int(steady.size()));
        if (wall_sum.size() < steady.size()) wall_sum.resize(steady.size()), wall_count.resize(steady.size());
        for (size_t i = 0; i < steady.size(); ++i) wall_sum[i] += steady[i].wall_s, ++wall_count[i];
        for (const DigestOp& o : d.ops) {
            OpFigure& f = run.ops[{o.name, o.op}];
            f.kind = o.kind, f.self_s += o.self_s, f.calls += o.calls;
        }
    }
    US_CHECK_INPUT(!run.ranks.empty(),
                   "{}: no rank has a steady step (a run of one step, or no step spans): "
                   "record at least two steps",
                   what);
    const double n = double(run.ranks.size());
    for (const RankFigures& r : run.ranks) run.mean.add(r.step, 1.0 / n);
    core_waits.set(run);
    for (auto& [key, f] : run.ops) f.self_s /= n, f.calls /= n;
    for (size_t i = 0; i < wall_sum.size(); ++i) run.step_walls_s.push_back(wall_sum[i] / wall_count[i]);
    // The range of the steady steps, less the slowest and the fastest where there are five or more: one step that
    // another process took a core from would otherwise set the noise alone, and hide a real change behind it.
    std::vector<double> walls = run.step_walls_s;
    std::sort(walls.begin(), walls.end());
    const size_t trim = walls.size() >= 5 ? 1 : 0;
    run.noise_s = walls[walls.size() - 1 - trim] - walls[trim];
    return run;
}

}  // namespace us::prof
