// A run's steady step as the diff reads it (docs/diff.md): each rank's figures averaged over its steady steps, and
// their mean over the ranks, from the run's digests and cross-rank facts alone (so the same code serves two ranks,
// a PyTorch folder and 1,024 ranks). Per step wall = compute + exposed + idle holds for each rank (step_breakdown.h),
// so it holds for the means, and the diff's causes add up by construction.
#pragma once

#include <array>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "profiler/analysis/compute_kind.h"
#include "profiler/analysis/cross_rank.h"

namespace us::prof {

// One rank's (or the ranks' mean) steady step, in seconds per step.
struct StepFigures {
    double wall_s = 0, compute_s = 0, exposed_s = 0, idle_s = 0;
    // The pipeline's bubble, at most the step's idle (the rest of idle is host/idle). A stage waiting inside the
    // embedding all-reduce for another's cooldown is bubble too: that wait is taken out of exposed_s (and the
    // embedding group's exposed time and waits) into idle_s, so that compute + exposed + idle is still the step.
    double bubble_s = 0;
    std::array<double, kGroupCount> group_exposed_s{};    // the engine's groups; the rest of exposed_s is other groups'
    std::array<double, kComputeKindCount> kind_self_s{};  // op table self time by kind
    double waits_s = 0;                                   // inside collectives, for the group's last rank, all groups
    std::array<double, kGroupCount> group_waits_s{};      // the same, the engine's groups
    // Communication outstanding (|M|) and the part of it under compute (|C ∩ M|): what a bucket size or an overlap
    // setting changes; the collectives begun and the bytes they carried (0: the trace does not say).
    double comm_s = 0, overlapped_s = 0, collectives = 0, collective_bytes = 0;
    double sized_collectives = 0;  // of the collectives, those whose bytes the trace says (the mean size's divisor)

    void add(const StepFigures& o, double weight);
};

struct RankFigures {
    int rank = 0;
    std::string label;
    GridCoords coords;
    int steps = 0;  // steady steps averaged
    StepFigures step;
};

// An op as the run's ranks ran it, per steady step, averaged over the ranks.
struct OpFigure {
    ComputeKind kind = ComputeKind::other;
    double self_s = 0, calls = 0;
};
using OpKey = std::pair<std::string, OpClass>;  // (name, op class): the op's identity across runs, never a time

struct RunFigures {
    std::vector<RankFigures> ranks;    // the ranks with steady steps, by rank
    StepFigures mean;                  // over `ranks`
    std::vector<double> step_walls_s;  // the ranks' mean wall per steady step index (the run's own spread)
    double noise_s = 0;    // the range of step_walls_s (largest less smallest; of the middle ones, from 5 steps)
    int steady_steps = 0;  // the most steady steps of a rank
    bool device = false;   // GPU compute (idle is the host's: launches, the data loader)
    // Per steady step, the wait for a core (core_wait.h): the ranks' mean, and the most one rank waited (in a job
    // whose ranks meet every step, the one that holds the others); -1 unknown (a rank's trace lacks it).
    double core_wait_s = -1, core_wait_most_s = -1;
    int core_wait_most_rank = -1;
    double worker_core_wait_s = -1;  // the ranks' mean of their OpenMP workers' waits, summed over them; -1 unknown
    // The ranks' mean share of their time ready to run spent waiting (wait / (wait + time on a core)), and the
    // most-waiting rank's time on a core; -1 where a trace lacks the time on a core.
    double core_wait_share = -1, core_wait_most_cpu_s = -1;
    std::map<OpKey, OpFigure> ops;   // the digests' leading op rows
    bool ops_complete = true;        // every rank's op table whole in its digest
    std::vector<std::string> notes;  // ranks left out (no steady step)
};

// Throws UserError naming `what` when no rank has a steady step.
RunFigures run_figures(const CrossRank& run, const std::string& what);

}  // namespace us::prof
