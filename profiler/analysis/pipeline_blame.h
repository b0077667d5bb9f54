// The pipeline part of blame (blame.h): for each of the run's pipelines (pipeline_stages.h: from the grid or the
// transfers), each stage's idle time split into waiting for its upstream stage, its downstream stage and the
// schedule, and the bottleneck stage.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "profiler/analysis/blame.h"

namespace us::prof {

// One pipeline's stages from their digests, over the steps from `first_step` on.
PipelineBlame pipeline_blame(const std::vector<int>& chain, const std::map<int, const RankDigest*>& by_rank,
                             int first_step);

// The median of `v` (0 when empty), and a rank's mean of one step figure over its steady steps.
double median(std::vector<double> v);
double steady_mean(const RankDigest& d, double DigestStep::*field);

}  // namespace us::prof
