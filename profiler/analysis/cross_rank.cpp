// The run's cross-rank facts, from its digests (cross_rank.h).
#include "profiler/analysis/cross_rank.h"

namespace us::prof {

const std::array<double, kGroupCount>& CrossRank::group_waits_of(int rank) const {
    static const std::array<double, kGroupCount> none{};
    const auto it = group_waits.find(rank);
    return it == group_waits.end() ? none : it->second;
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
    x.group_waits = group_waits(x.collectives, x.digests, x.first_steady_step);
    x.pipelines = pipeline_stages(x.digests, options.microbatches);
    x.blame = blame(x.digests, x.collectives, x.pipelines, options.rules);
    return x;
}

}  // namespace us::prof
