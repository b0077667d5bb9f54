// The time a rank's trainer thread was ready to run but waited for a core, over its steady steps: the rise of its
// runqueue_wait_ms counter (profiler/event.h; engine/train/core_wait.h) from the end of the step before the first
// steady step to the end of the last. What the machine's other load took from the rank, measured by the kernel;
// the report shows it per rank, and it can explain a pipeline bubble above its figure (misses.cpp).
#pragma once

#include <vector>

#include "profiler/analysis/step_breakdown.h"
#include "profiler/trace/trace_store.h"

namespace us::prof {

// Seconds over the steady steps; -1 where the trace has no such counter around them (an imported run, a trace
// from before the counter, a kernel without schedstat).
double runqueue_wait_s(const TraceStore& store, const RankTrace& rt, const std::vector<StepBreakdown>& steady);

}  // namespace us::prof
