// The overlap view's bars, from the report: per rank, the share of its steady-step wall time spent in compute
// alone, in communication hidden behind compute, in exposed communication and idle; and the rank the blame names
// (profiler/analysis/blame.h): the one the others wait for, or a pipeline's bottleneck stage. The rank with the most
// idle time is the victim, not the culprit, so none is marked for its idle time.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "profiler/analysis/report.h"

namespace us::gui {

struct OverlapBar {
    int rank = 0;
    std::string label;
    double wall_s = 0;
    // fractions of wall time; they add up to 1
    double compute_only = 0, overlapped = 0, exposed = 0, idle = 0;
    double overlap_pct = 0;  // of communication, hidden behind compute
    double bubble_fraction = 0, bubble_theory = 0;
};

struct OverlapModel {
    std::vector<OverlapBar> bars;
    int marked = -1;   // index into bars of the rank the blame names (-1: none stands out)
    std::string mark;  // "holds the run back", "bottleneck stage 2"
};

OverlapModel build_overlap_model(const prof::Report& report);
// The ranks the blame names, with what it says of each: the straggler that stands out, a pipeline's bottleneck
// stage that stands out (timeline headers, overlap bars, the Ranks view).
std::map<int, std::string> blamed_ranks(const prof::Blame& blame);

// A group's name in the overlap view's table, with the nodes it spans ("dp (across 2 nodes)"): the collectives that
// crossed the inter-node link.
std::string overlap_group_label(const prof::RankReport& r, int group);

}  // namespace us::gui
