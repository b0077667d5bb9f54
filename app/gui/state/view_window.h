// The time window the time-based views share (timeline, memory), the rank they point at, and whether it follows a
// live run. Pure view state: it reads the store's extent and the report's steps, and owns nothing else.
#pragma once

#include <cstdint>

#include "profiler/analysis/report.h"
#include "profiler/trace/trace_store.h"

namespace us::gui {

struct ViewWindow {
    int64_t t0 = 0, t1 = 1;  // ns, the store's clock
    bool follow = true;      // live: keep the latest steps in view
    int selected_rank = 0;
    int focus_rank = -1;     // the timeline scrolls to this rank once (the Ranks view's pick), then -1
    bool show_waits = true;  // the blame's waits drawn as arrows (views/timeline.cpp)

    void fit_all(const prof::TraceStore& store);
    void fit_step(const prof::Report& report, int step);  // the step's window on the slowest rank
    // Following: the last three steps (everything, early on).
    void show_latest(const prof::TraceStore& store, const prof::Report& report);
    void zoom(double factor, int64_t around);
    void pan(int64_t dt);
};

int step_at(const prof::Report& report, int64_t t);  // the step running at time t (0 if none)

}  // namespace us::gui
