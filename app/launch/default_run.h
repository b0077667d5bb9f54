// The default run, shared by the GUI and its headless fallback: the small preset on dp 2 x pp 2 (4 ranks) with
// 4 micro-batches for 60 steps, so that a first look shows data-parallel all-reduce and pipeline bubbles at once. Flags
// the user gives win: with -n N and no layout flags the run is N data-parallel ranks.
#pragma once

#include <string>
#include <vector>

namespace us::app {

struct DefaultRun {
    int ranks = 0;                  // for mpirun -n
    std::vector<std::string> args;  // ultrascope-train flags: the defaults that apply, then the user's
};

// ranks = 0: not given on the command line.
DefaultRun default_run(int ranks, const std::vector<std::string>& train_args);

}  // namespace us::app
