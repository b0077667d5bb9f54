// What a rank's digest keeps for the run's pipelines (pipeline_stages.h), read from its spans in the one pass that
// makes the digest (rank_digest.h): per step its work's window and busy time (a stage's bubble is their difference),
// and how many forward micro-batches it annotated in a step (torch.distributed.pipelining's "Forward i",
// "PP:<stage>F<i>").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/trace/trace_store.h"

namespace us::prof {

// One step's work on a rank: from its first to its last work of the step, and the union of its work in between.
struct WorkWindow {
    int32_t step = 0;
    int64_t window_ns = 0, work_ns = 0;
};

// The rank's work per step (steps without work are left out): the GPU's kernels where the rank has device spans (a
// running receive kernel is waiting for the previous stage: not work), else its compute lane's ops.
std::vector<WorkWindow> work_windows(const RankTrace& rt);

// The most distinct forward micro-batches the rank annotated in one step (0: no such annotations; Schedule1F1B
// writes none).
int annotated_micro_batches(const TraceStore& store, const RankTrace& rt);

}  // namespace us::prof
