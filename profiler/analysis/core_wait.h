// The time a rank's trainer thread was ready to run but waited for a core: what the machine's other load took from
// the rank, measured by the kernel (the trainer's runqueue_wait_ms counter, profiler/event.h and
// engine/train/core_wait.h, recorded at each step's end). Per step it is the counter's rise since the step before;
// the report gives each rank's over its steady steps, the Ranks view per step, blame the straggler's against its
// group's, and it can explain a pipeline bubble above its figure (misses.cpp). It counts the trainer's thread only:
// BLAS helpers and the communication thread wait uncounted.
#pragma once

#include <vector>

#include "profiler/analysis/step_breakdown.h"
#include "profiler/trace/trace_store.h"

namespace us::prof {

// Sets each step's core_wait_s where the counter was recorded at its end and at the end of the step before it (the
// first recorded step stays unknown: -1).
void add_core_waits(const TraceStore& store, const RankTrace& rt, std::vector<StepBreakdown>& steps);

// Seconds over the given steps (StepBreakdown or DigestStep: anything with core_wait_s); -1 where there are none or
// one of them is unknown (an imported run, a trace from before the counter, a kernel without schedstat).
template <typename Step = StepBreakdown>  // the default: a braced list of steps
double runqueue_wait_s(const std::vector<Step>& steps) {
    if (steps.empty()) return -1;
    double total = 0;
    for (const Step& s : steps) {
        if (s.core_wait_s < 0) return -1;
        total += s.core_wait_s;
    }
    return total;
}

}  // namespace us::prof
