// The steps of a captured rank, and whether every rank captured the same ones. On-demand traces carry no
// ProfilerStep markers: a step is told by the optimizer. Step K runs from the end of optimizer step K-1 (the start
// of the capture for the first) to the end of optimizer step K, so that the steps tile the captured window the way
// Kineto counted its iterations (its hook runs as each optimizer step ends).
#pragma once

#include <string>
#include <vector>

#include "profiler/capture/raw_trace.h"

namespace us::capture {

// The trace's steps on its own clock: its ProfilerStep# spans when it has them (nothing then to derive), else one
// per outermost Optimizer.step# annotation.
std::vector<TimeSpan> derive_steps(const RawTrace& trace);

struct RankSteps {
    int rank = -1;
    std::vector<TimeSpan> steps;  // on the trace's own clock
    int64_t clock_base_ns = 0;    // baseTimeNanoseconds: steps + this are wall-clock times, comparable across ranks
};

struct StepCheck {
    int steps = 0;     // the fewest steps a rank has
    bool same = true;  // every rank the same count, and each step K overlapping on every rank
    std::string what;  // when not same: which ranks differ and the steps they have
};

// The share of the shortest of the ranks' step K spans that all of them must cover at once for step K to be the
// same step everywhere. DDP and FSDP ranks run one step in lockstep (their collectives wait for each other), so the
// same step overlaps almost whole, and a neighbouring step hardly at all; ranks on one node read one clock, ranks on
// several nodes their synchronised wall clocks (an offset between them counts against the overlap).
inline constexpr double kSameStepOverlap = 0.5;

// The ranks compared with the first rank of the commonest step count.
StepCheck check_same_steps(const std::vector<RankSteps>& ranks);

}  // namespace us::capture
