// Whether PyTorch rank files are of one run, as far as one host's clock can tell. Ranks on one host share its clock
// (Kineto's times are the host's), and the ranks of one run profile the same steps, so two of them whose spans do not
// overlap at all were recorded at different times: two runs' files mixed in one folder, or two cycles of a profiler
// schedule. Read as one run, blame would name a rank as holding back a run it was never part of. Ranks on different
// hosts are not compared: their clocks may differ by more than a step (blame estimates the offsets).
#pragma once

#include <string>
#include <vector>

#include "profiler/trace/trace_store.h"

namespace us::prof {

// Two ranks of one host further apart than this are of two runs (refused); closer, one run whose ranks profiled
// different steps (a capture whose ranks armed a poll apart): said as a warning.
inline constexpr double kOneRunApartS = 60;

// A rank's time on its host: from its first span's begin to its last span's end.
struct RankWindow {
    int rank = 0;
    std::string host;  // "" unknown: never compared
    int64_t begin = 0, end = 0;
};

// The window of every rank of `store` that holds spans (finalized).
std::vector<RankWindow> rank_windows(const TraceStore& store);

// What two ranks say of one run: nothing (`said` empty), ranks of one run that profiled apart (a warning), or files
// of two runs (refused), each naming both ranks and what to do.
struct OneRunCheck {
    std::string said;
    bool two_runs = false;
};

OneRunCheck not_one_run(const RankWindow& a, const RankWindow& b);

// A pair among `windows` that cannot be of one run, else one that profiled apart, said as not_one_run says it
// (per host, in order of begin: thousands of ranks cost a sort).
OneRunCheck first_not_one_run(const std::vector<RankWindow>& windows);

}  // namespace us::prof
