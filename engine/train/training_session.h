// A training run of one rank, end to end, once the command line is parsed and the backend and process grid
// exist: the profiler (trace file, live stream), the trainer, the steps with their progress display and metrics,
// fault injection for the failure tests, the final checkpoint and trace, and the closing summary.
#pragma once

#include "engine/backend/backend.h"
#include "engine/parallel/grid.h"
#include "common/settings/config.h"

namespace us {

// Runs cfg.steps steps on this rank; returns the process exit status.
int run_training(TrainConfig& cfg, Backend& backend, ProcessGrid& grid);

}  // namespace us
