// The overlap view's bars, from the report: per rank, the share of its steady-step wall time spent in compute
// alone, in communication hidden behind compute, in exposed communication and idle; and the worst rank (the most
// time not computing).
#pragma once

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
    int worst = -1;  // index into bars of the rank with the most exposed + idle time
};

OverlapModel build_overlap_model(const prof::Report& report);

}  // namespace us::gui
