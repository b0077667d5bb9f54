// The training curves, per step: loss (measured), step time (measured: the slowest rank's), tokens/s (the step's
// global tokens over that time, the report's definition) and MFU (derived: tokens/s x the formula's FLOPs per
// token / the ranks' peaks, whose source each rank's metadata names), from the ranks' counters and the run's
// metadata.
#pragma once

#include <vector>

#include "profiler/trace/trace_store.h"

namespace us::gui {

struct TrainingPoint {
    int step = 0;
    double loss = 0, tokens_per_s = 0, step_ms = 0, mfu = 0;
};

std::vector<TrainingPoint> build_training_series(const prof::TraceStore& store);

}  // namespace us::gui
