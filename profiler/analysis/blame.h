// Who holds the run back (docs/blame.md), from the ranks' digests (rank_digest.h) alone, so that it runs the same
// on 2 ranks and on thousands. The k-th collective of a process-group instance is one operation on each of its
// ranks; it cannot finish before the last of them arrives, so the rank whose part was shortest arrived last and
// every other rank's extra time was spent waiting for it. A rank waiting in a collective is the victim; the blame
// goes to the one it waited for. Stragglers are ranked by the waiting they cause. Pipelines: each stage's idle time
// split into waiting for its upstream stage (the forward's activations), for its downstream stage (the backward's
// gradients) and the schedule's own warm-up and cool-down; the stage with the most work per step is the bottleneck.
// Every figure is measured. Durations need no common clock; where a trace gives no clock offset between ranks, the
// offsets are estimated from the collectives' ends (a collective ends at about the same moment on all its ranks),
// with their uncertainty.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "profiler/analysis/collective_match.h"
#include "profiler/analysis/pipeline_stages.h"
#include "profiler/analysis/rank_digest.h"

namespace us::prof {

struct RankClock {
    int rank = 0;
    std::optional<int64_t> offset_ns;       // to subtract from the rank's times to reach the run's clock
    std::optional<int64_t> uncertainty_ns;  // unknown when not estimated
    std::string method;  // "the trace's" (the engine measured it), "collectives" (estimated here), "none"
};

struct Straggler {
    int rank = 0;
    std::string label;
    std::string group;          // the process group in which it caused the most waiting
    int last_arrivals = 0;      // collectives of `group` in which it arrived last
    int collectives = 0;        // collectives of `group` it took part in (matched across the group's ranks)
    int all_last_arrivals = 0;  // the same over every group it is in
    int all_collectives = 0;
    double others_waited_s = 0;  // the other ranks' waits in the collectives it arrived last in, as time (wait_time.h)
    double share = 0;            // of all the waiting in the run
    double compute_s = 0;        // its compute per steady step
    double group_median_compute_s = 0;  // the median of its group's other ranks (itself left out: a pair's median
                                        // with itself in would be their mean)
    double compute_vs_median = 0;       // compute_s / that median (0 unknown)
    double late_s = 0;  // per steady step: the waiting it caused each other rank of its group (how late it came)
    // Its threads' waits for a core against its group's other ranks' (blame_core_wait.h): the trainer's, then its
    // OpenMP workers' summed (at most what they cost it). Per steady step; -1 / nullopt unknown.
    struct CoreWait {
        double wait_s = -1, group_median_wait_s = -1;  // measured
        // measured: the share of its time ready to run spent waiting (wait / (wait + time on a core)), and the
        // group's other ranks' median share (-1 where the trace has no time on a core: from before it was recorded)
        double share = -1, group_median_share = -1;
        // derived: the wait beyond what its own time on a core would have waited at the group's median share (beyond
        // the group's median wait where the shares are unknown)
        std::optional<double> excess_s;
    };
    CoreWait trainer_wait, workers_wait;
    // The trainer's excess alone is at least half of how late it came: the machine's other load on its CPU held it,
    // not its own work. Else, with its OpenMP workers' excess: the load may have held it.
    bool waited_for_core = false, workers_may_have_waited = false;
    std::vector<int> steps;                        // the steps it arrived last in, most waiting caused first
    std::map<std::string, int> phases;             // "forward", "backward", "optimizer", "none": last arrivals by phase
    int steps_on_top = 0, steps_with_waiting = 0;  // steps it caused the most waiting in, of those with waiting
    bool stands_out = false;                       // named as holding the run back (see Blame::verdict)
};

// Every rank of one node holding the run back together (blame_node.h): each arrives last in turn, so no one of them
// stands out alone, but together they pass the rule as one rank would.
struct NodeBlame {
    std::string host;
    std::vector<int> ranks;                        // all the node's ranks, sorted; each is a straggler that stands out
    double others_waited_s = 0, share = 0;         // the waiting they caused, and its share of all the waiting
    int steps_on_top = 0, steps_with_waiting = 0;  // steps in which the node caused the most waiting (of all nodes)
    double compute_vs_median = 0;                  // its ranks' mean compute over their groups' medians (0 unknown)
    // Per steady step: its ranks' mean trainer-thread wait for a core and the other ranks' (core_wait.h; -1 unknown),
    // and how late it came (the waiting it caused each other rank). Weighed as a straggler's (blame_core_wait.h): the
    // mean shares of the time ready to run spent waiting (-1 where a trace lacks the time on a core), and the excess:
    // its ranks' mean wait beyond what their own time on a core would have waited at the other ranks' mean share
    // (beyond the other ranks' mean wait where unweighed). waited_for_core: the excess is at least half of late_s.
    double core_wait_s = -1, others_core_wait_s = -1, late_s = 0;
    double wait_share = -1, others_wait_share = -1;
    std::optional<double> excess_s;
    bool waited_for_core = false;
};

struct StageBlame {
    int rank = 0;
    int stage = 0;
    double compute_s = 0;             // per steady step
    double waiting_upstream_s = 0;    // per steady step: receives from the stage before (the forward)
    double waiting_downstream_s = 0;  // per steady step: receives from the stage after (the backward)
    double schedule_bubble_s = 0;     // per steady step: the rest of its idle time (warm-up, cool-down)
};

struct PipelineBlame {
    std::vector<int> ranks;  // in stage order
    int bottleneck_stage = -1, bottleneck_rank = -1;
    double bottleneck_compute_s = 0, median_compute_s = 0;  // per steady step
    bool stands_out = false;  // the bottleneck's work is over 1.25x the median stage's: named in the verdict
    std::string order_from;   // how the stage order was told
    std::vector<StageBlame> stages;
};

// One rank's waiting in one step, inside its collectives: what it made the others wait (it arrived last), and what
// it waited for others (the Ranks view's heatmap).
struct RankStepWait {
    int rank = 0, step = 0;
    double caused_s = 0, suffered_s = 0;
};

// One wait, for the timeline's arrows: rank `waiter` entered a collective at `waiter_begin_ns` and waited `wait_ns`
// for rank `culprit`, which entered the same collective (the k-th of their group) last, at `culprit_begin_ns`. Times
// are each rank's own, as its spans are.
struct WaitEdge {
    int waiter = 0, culprit = 0;
    int64_t waiter_begin_ns = 0, culprit_begin_ns = 0, wait_ns = 0;
};

struct Blame {
    std::vector<RankClock> clocks;
    std::vector<Straggler> stragglers;  // every rank that caused waiting, most to blame first
    std::vector<PipelineBlame> pipelines;
    int collectives_matched = 0;      // matched collective operations (each over its group's ranks)
    double waited_s = 0;              // all the waiting inside collectives, every rank summed
    double mean_step_s = 0;           // the ranks' mean steady step
    bool culprit = false;             // a rank stands out (or a node's ranks together: `node`)
    std::optional<NodeBlame> node;    // where the ranks that hold the run back are every rank of one node
    std::string verdict;              // one line, in words
    std::string why_not;              // the rule the most waited-for rank failed, where none is named
    std::vector<RankStepWait> waits;  // by rank, then step; only where there was waiting
    // Every wait of a rank for the last to arrive, by the waiter's begin; beyond kMaxWaitEdges only the longest.
    static constexpr size_t kMaxWaitEdges = 200000;
    std::vector<WaitEdge> edges;
};

// The rule a rank must pass to be named (docs/blame.md): it caused at least min_share of all the waiting, at least
// min_ratio times what the next rank caused, each waiting rank at least min_step_share of a step per step, and it
// caused the most waiting in at least min_step_fraction of the steps with waiting and in at least min_steps of them
// (noise picks a different rank each step; one step is not evidence). A node (blame_node.h) passes the same rules with
// its ranks' waiting summed, against the next node's.
struct BlameRules {
    double min_share = 0.5, min_ratio = 2.0, min_step_share = 0.02, min_step_fraction = 0.6;
    int min_steps = 2;
};

// From the digests' collectives matched across ranks (collective_match.h) and the run's pipelines
// (pipeline_stages.h), made once for the run (cross_rank.h).
Blame blame(const std::vector<RankDigest>& digests, const CollectiveMatches& collectives,
            const PipelineStages& pipelines, const BlameRules& rules = {});
// The same, matching and finding them here.
Blame blame(const std::vector<RankDigest>& digests, const BlameRules& rules = {});

// "blame": {"stragglers": [...], "pipelines": [...], "clocks": [...], ...} (docs/report-schema.md)
nlohmann::json blame_json(const Blame& b);
// The report's opening section, "Who holds the run back".
std::string format_blame(const Blame& b);

}  // namespace us::prof
