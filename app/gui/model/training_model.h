// The training curves, per step: loss, tokens/s, step time and MFU, from the ranks' counters (the loss comes
// from the ranks that compute it: the last pipeline stage) and the run's metadata.
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
