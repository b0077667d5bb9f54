// What changed between two runs (docs/diff.md): the steady step of run A against run B, and B's step minus A's split
// into causes that add up to it, each with its evidence. Made from the runs' digests and cross-rank facts only
// (run_figures.h), for our runs, PyTorch folders and 1,024-rank runs alike. Per rank and step, wall = compute +
// exposed communication + idle (step_breakdown.h); the diff takes the ranks' mean steady step, so
//   ΔT = Σ_kind Δcompute_kind + new_ops + Σ_group Δexposed_group + straggler + Δbubble + Δhost/idle + unexplained,
// where the unexplained part is what the op tables' self times do not account for of Δcompute, said, never hidden.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "profiler/analysis/cross_rank.h"
#include "profiler/diff/diff_align.h"
#include "profiler/diff/setting_changes.h"
#include "profiler/diff/work_per_step.h"

namespace us::prof {

enum class CauseKind { compute, exposed_comm, bubble, straggler, host, idle, new_ops };
inline constexpr const char* kCauseKindNames[] = {"compute", "exposed_comm", "bubble", "straggler",
                                                  "host",    "idle",         "new_ops"};

struct CauseOp {
    std::string name;
    std::string match;  // "moved", "new", "gone"
    double a_ms = 0, b_ms = 0;
};

struct Cause {
    CauseKind kind = CauseKind::compute;
    std::string what;          // the compute kind ("attention"), the group ("dp"), or empty
    double ms = 0;             // B minus A, per step (positive: B is slower by it)
    std::string source;        // "measured" (a difference of measured figures) or "derived" (attributed by blame)
    std::string group;         // evidence: the process group
    std::optional<int> rank;   // evidence: the rank (B's) behind it most
    std::vector<CauseOp> ops;  // evidence: the ops that moved most
    std::string evidence;      // in words
};

struct WhatIf {
    std::string name;    // "without the straggler", "with A's kernels"
    double step_ms = 0;  // predicted
    std::string basis;
};

struct MemoryRow {
    std::string category;
    std::optional<int64_t> a_bytes, b_bytes;  // the largest peak over the run's ranks; unknown where not traced
};

struct RankDelta {
    int a_rank = 0, b_rank = 0;
    std::string label;                                                                 // B's
    double a_step_ms = 0, b_step_ms = 0, compute_ms = 0, exposed_ms = 0, idle_ms = 0;  // B minus A but the steps
};

// Whether blame names a straggler in the run (its top row stands out): every run with ranks has a first row, and
// only a named one's waits are a straggler's to the diff and its what-if.
inline bool names_straggler(const Blame& b) { return !b.stragglers.empty() && b.stragglers.front().stands_out; }

// One run as the diff takes it.
struct DiffSide {
    std::string name;  // what the user named (a path)
    const CrossRank* run = nullptr;
    std::map<std::string, int64_t> memory_peaks;  // category -> bytes, the largest over the ranks (empty: unknown)
    nlohmann::json settings;                      // the run's settings (an engine run's config); null: unknown
};

// A run of A's or of B's settings again (`--repeat`): how far this machine moves between whole runs.
struct RepeatRun {
    std::string name;
    double step_ms = 0;  // measured: the ranks' mean steady step
    char of = 'A';       // whose settings it runs again: 'A' or 'B'
};

struct RunDiff {
    std::string a_name, b_name;
    int a_ranks = 0, b_ranks = 0, a_steps = 0, b_steps = 0;
    double a_step_ms = 0, b_step_ms = 0;  // measured: the ranks' mean steady step
    double delta_ms = 0;                  // measured: b - a
    double noise_ms = 0;                  // measured: the larger of the two below
    double noise_within_ms = 0;           // measured: the larger of the runs' ranges of their steady steps
    // measured: the larger of the ranges of the steps of A and its repeats, and of B and its repeats
    std::optional<double> noise_between_ms;
    char noise_between_of = 'A';                 // whose runs' range it is
    std::vector<RepeatRun> repeats;              // the runs of A's or B's settings given as repeats
    std::vector<double> a_steps_ms, b_steps_ms;  // measured: each steady step, the ranks' mean
    // measured: each run's wait for a core per steady step (the machine's other load); unknown where a rank's trace
    // lacks it. It is inside the step's compute and waits, not a cause beside them.
    struct CoreWait {
        double mean_ms = 0;  // the ranks' mean
        double most_ms = 0;  // the rank that waited most (it holds the others where they meet every step)
        int most_rank = -1;
        double workers_mean_ms = -1;  // the ranks' mean of their OpenMP workers' waits, summed over them; -1 unknown
        double share = -1;            // the ranks' mean share of their time ready to run spent waiting; -1 unknown
        double most_cpu_ms = -1;      // the most-waiting rank's time on a core; -1 unknown
    };
    std::optional<CoreWait> a_core_wait, b_core_wait;
    // measured, the ranks' mean per steady step: communication outstanding, the part of it under compute, and the
    // collectives begun with their bytes (0: the trace does not say): what bucket sizes and overlap change.
    struct Communication {
        double ms = 0, hidden_ms = 0, collectives = 0, bytes = 0;
        double sized_collectives = 0;  // those whose bytes the trace says
    };
    Communication a_comm, b_comm;
    // Where a run gave a machine more compute threads than cores (its ranks take turns; core_sharing.h), in words;
    // "" where it did not or its traces do not say.
    std::string a_oversubscribed, b_oversubscribed;
    bool within_noise = false;  // |delta| <= noise
    double unexplained_ms = 0;  // delta minus the causes' sum
    std::vector<Cause> causes;  // largest |ms| first
    std::vector<WhatIf> what_if;
    std::vector<MemoryRow> memory;
    std::optional<std::vector<SettingChange>> settings;  // what differs between A's and B's; nullopt: unknown
    std::optional<WorkPerStep> work;  // where the runs' steps train different numbers of tokens (work_per_step.h)
    std::string ranks_by;
    std::vector<int> a_only, b_only;  // ranks that could not be matched
    std::vector<std::string> notes;   // what could not be compared, and why
    std::vector<RankDelta> ranks;     // the matched ranks, largest step change first (at most kMaxRanks)
    static constexpr size_t kMaxRanks = 16;
    std::string verdict;  // one line: the answer first
};

// `repeats`: other runs of A's or of B's settings, whose steps with that run's give the noise between runs (a run of
// settings A and B share counts as A's). Throws UserError when a run has no rank with a steady step, or a repeat's
// settings are known and are neither A's nor B's.
RunDiff diff_runs(const DiffSide& a, const DiffSide& b, const std::vector<DiffSide>& repeats = {});

// The predicted steps (what_if.cpp), from the figures the diff compared.
std::vector<WhatIf> what_if(const RunFigures& a, const RunFigures& b, const Blame& b_blame);

// Where the noise figure comes from: "the runs' own step spread" or "the spread between runs of A's settings" (or
// B's).
std::string noise_words(const RunDiff& d);
// Each run's communication a step, the part compute hid and its collectives, in one line ("" where neither run
// communicated): the text's line and the GUI's Compare tab.
std::string communication_words(const RunDiff& d);
nlohmann::json diff_json(const RunDiff& d);  // docs/report-schema.md, "ultrascope diff --json"
std::string format_diff(const RunDiff& d);   // verdict first, each figure labelled measured/derived/predicted

}  // namespace us::prof
