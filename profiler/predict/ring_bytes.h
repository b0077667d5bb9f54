// What one collective sends per rank by the ring algorithms: the unit in which the predictions count communication
// (predict_comm.cpp) and the analysis counts what the ranks recorded (profiler/analysis/step_breakdown.cpp).
#pragma once

#include "profiler/event.h"

namespace us::predict {

// Bytes a rank sends for one collective of `bytes` (its span's buffer: the whole for all-gather and
// reduce-scatter) in a group of n ranks, by the ring algorithms: all-reduce 2(n-1)/n, all-gather, reduce-scatter
// and broadcast (n-1)/n; an all-to-all's span and a send record what went to the other ranks; a receive nothing.
double bytes_sent(prof::OpClass op, double bytes, int n);

}  // namespace us::predict
