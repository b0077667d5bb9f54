// One rank's capture as it leaves the node: who it is (from its environment) and Kineto's file as written —
// profiler/capture's CapturedRank, whose raw_bytes carry the file's bytes (read on the node, or streamed from an
// agent) and whose raw_trace names it in messages.
#pragma once

#include "profiler/capture/captured_rank.h"

namespace us::app {

using CapturedTrace = us::capture::CapturedRank;

}  // namespace us::app
