// The run's cross-rank facts (docs/blame.md): computed once, from the ranks' digests only, for a run opened whole
// (build_report, report.h) and for one reported from its digests (profiler/runs/digest_report.h) alike: the
// collectives matched across each group instance's ranks and each rank's waits in them, the pipelines with each
// stage's idle time, and who holds the run back. The report's text and JSON, the GUI's views (Ranks, Timeline,
// Overlap, Experts) and the lessons (through the report's JSON) read them here; none computes them again from spans.
#pragma once

#include <array>
#include <map>
#include <vector>

#include "profiler/analysis/blame.h"
#include "profiler/analysis/collective_match.h"
#include "profiler/analysis/core_sharing.h"
#include "profiler/analysis/pipeline_stages.h"
#include "profiler/analysis/rank_digest.h"

namespace us::prof {

struct CrossRankOptions {
    int microbatches = 0;  // `report --microbatches M`: an imported pipelined run's micro-batches a step (0: not given)
    BlameRules rules;
};

struct CrossRank {
    std::vector<RankDigest> digests;  // by rank: what everything below is read from
    CollectiveMatches collectives;    // matched across each group instance's ranks (indices into `digests`)
    int first_steady_step = 0;        // the latest of the ranks' first steady steps
    // rank -> seconds it waited inside collectives for their group's last rank, over the steady steps, by group
    // (GroupKind order) and in all; the rest of the collectives' time is the transfer itself
    std::map<int, RankWaits> waits;
    PipelineStages pipelines;  // the run's pipelines and each stage's bubble per step
    Blame blame;               // who holds the run back
    // Which ranks share a machine's cores, and whether the run gives them more compute threads than cores
    // (core_sharing.h); empty where unrecorded.
    std::vector<CoreSharing> core_sharing;

    // A rank's waits (zeros for a rank without a digest), and the same by group.
    const RankWaits& waits_of(int rank) const;
    const std::array<double, kGroupCount>& group_waits_of(int rank) const { return waits_of(rank).by_group; }
};

CrossRank cross_rank(std::vector<RankDigest> digests, const CrossRankOptions& options = {});
// The same with the digests' collectives matched already (build_report matches them before it measures the steps,
// whose pipeline windows count the waits in the embedding group's collective).
CrossRank cross_rank(std::vector<RankDigest> digests, CollectiveMatches collectives, const CrossRankOptions& options);

}  // namespace us::prof
