// What the timeline draws, computed without a window: for a lane and a time window mapped onto `width` pixels,
// the spans to draw per row, culled by binary search and with runs of spans narrower than `min_px` folded into one
// item that carries their count (as Tracy does), so that a million spans cost a few thousand items per frame.
#pragma once

#include <cstdint>
#include <vector>

#include "profiler/trace/trace_store.h"

namespace us::gui {

struct TimelineItem {
    float x0 = 0, x1 = 0;  // pixels from the left edge of the lane
    int row = 0;
    const prof::Span* span = nullptr;  // the span drawn, or the first of a fold
    uint32_t folded = 0;               // 0: one span; n > 1: n spans folded into this item
};

struct TimeWindow {
    int64_t t0 = 0, t1 = 1;  // ns on the store's time base
    float width_px = 1;
    double px_per_ns() const { return double(width_px) / double(t1 - t0); }
    float x_of(int64_t t) const { return float(double(t - t0) * px_per_ns()); }
    int64_t t_of(float x) const { return t0 + int64_t(double(x) / px_per_ns()); }
};

// Appends the items of `lane` visible in `w` to `out` (rows in order, items left to right within a row). With
// `rows`, only those rows of the lane, each item's row being its position in the list.
void build_lane_items(const prof::LaneTrack& lane, const TimeWindow& w, float min_px, std::vector<TimelineItem>& out,
                      const std::vector<int>* rows = nullptr);

// A lane whose rows are by thread (LaneTrack::rows_by_thread) drawn as one sub-lane per thread or stream: the
// rows of each thread, in thread order, at most `max_rows` each (deeper nesting is not drawn).
struct ThreadRows {
    uint8_t thread = 0;
    std::vector<int> rows;
};
std::vector<ThreadRows> rows_by_thread(const prof::LaneTrack& lane, int max_rows);

// Idle gaps of a rank's work lane (compute, or device on a GPU traced by CUPTI) inside [t0, t1): stretches with
// no op running, at least min_ns long.
struct Gap {
    int64_t begin, end;
};
std::vector<Gap> idle_gaps(const prof::LaneTrack& compute, int64_t t0, int64_t t1, int64_t min_ns);

}  // namespace us::gui
