// One rank's capture as it leaves the node: who it is (from its environment) and Kineto's file as written. The
// fields are those of us::capture::CapturedRank (profiler/capture/captured_rank.h, written on another branch):
// at the merge this struct becomes `using CapturedTrace = us::capture::CapturedRank;` and write_capture
// (capture_output.h) calls finish_capture.
#pragma once

#include <string>
#include <vector>

namespace us::app {

struct CapturedTrace {
    int rank = -1, world_size = 0, local_rank = -1;
    int pid = 0;
    std::string host;
    std::string raw_trace;
};

}  // namespace us::app
