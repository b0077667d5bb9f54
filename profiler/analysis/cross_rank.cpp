// The run's cross-rank facts, from its digests (cross_rank.h).
#include "profiler/analysis/cross_rank.h"

namespace us::prof {

const RankWaits& CrossRank::waits_of(int rank) const {
    static const RankWaits none{};
    const auto it = waits.find(rank);
    return it == waits.end() ? none : it->second;
}

CrossRank cross_rank(std::vector<RankDigest> digests, const CrossRankOptions& options) {
    CollectiveMatches collectives = match_collectives(digests);
    return cross_rank(std::move(digests), std::move(collectives), options);
}

CrossRank cross_rank(std::vector<RankDigest> digests, CollectiveMatches collectives, const CrossRankOptions& options) {
    CrossRank x;
    x.digests = std::move(digests);
    x.collectives = std::move(collectives);
    x.first_steady_step = first_steady_step(x.digests);
    x.waits = steady_waits(x.collectives, x.digests, x.first_steady_step);
    x.pipelines = pipeline_stages(x.digests, options.microbatches);
    x.blame = blame(x.digests, x.collectives, x.pipelines, options.rules);
    x.core_sharing = core_sharing(x.digests);
    return x;
}

}  // namespace us::prof
