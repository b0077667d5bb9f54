// Timeline rows as small classes behind one base: a rank's header, and a lane of a rank (host, compute, comm,
// p2p, and on a GPU traced by CUPTI device and device_comm) whose spans are culled and folded by the timeline
// model. The timeline view stacks them.
#pragma once

#include <imgui.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "app/gui/state/derived_views.h"
#include "app/gui/model/timeline_model.h"

namespace us::gui {

struct TimelineContext {
    ImDrawList* dl = nullptr;
    float x0 = 0;  // left edge of the lanes (after the gutter)
    TimeWindow window;
    float row_h = 16;
    const prof::TraceStore* store = nullptr;
    DerivedViews* derived = nullptr;      // its idle-gap cache
    const prof::Span* hovered = nullptr;  // set by a row when the mouse is over one of its spans
    uint32_t hovered_folded = 0;
    int hovered_rank = -1;
    std::vector<TimelineItem> items;  // scratch, reused across rows and frames
};

class TimelineRow {
public:
    virtual ~TimelineRow() = default;
    virtual float height(const TimelineContext& ctx) const = 0;
    virtual void draw(TimelineContext& ctx, float y) = 0;
    virtual int header_rank() const { return -1; }  // the rank a header row names
};

class RankHeaderRow final : public TimelineRow {
public:
    // `clock`: how this rank's times were aligned to rank 0's ("" on one host, where the ranks share a clock);
    // `mark`: what the blame says of it ("" nothing)
    RankHeaderRow(int rank, std::string label, std::string status, std::string mark, std::string clock)
        : m_rank(rank),
          m_label(std::move(label)),
          m_status(std::move(status)),
          m_mark(std::move(mark)),
          m_clock(std::move(clock)) {}
    float height(const TimelineContext& ctx) const override { return ctx.row_h + 4; }
    void draw(TimelineContext& ctx, float y) override;
    int header_rank() const override { return m_rank; }

private:
    int m_rank;
    std::string m_label, m_status, m_mark;
    std::string m_clock;
};

// A lane of a rank. A lane whose rows are by thread (a GPU's streams; every lane of an imported PyTorch trace)
// and that holds more than one thread draws a sub-lane per thread or stream, each labelled.
class LaneRow final : public TimelineRow {
public:
    LaneRow(int rank, prof::Lane lane) : m_rank(rank), m_lane(lane) {}
    float height(const TimelineContext& ctx) const override;
    void draw(TimelineContext& ctx, float y) override;

private:
    // The sub-lanes: one per thread, or one holding the lane's first rows.
    std::vector<ThreadRows> groups(const prof::LaneTrack& lane) const;
    void draw_rows(TimelineContext& ctx, const prof::LaneTrack& lane, const std::vector<int>& rows, float y, float h);

    int m_rank;
    prof::Lane m_lane;
};

// The label of a sub-lane: "stream 7" on the device lanes (the stream's id when the trace names it, else its slot),
// "thread 2" elsewhere.
std::string thread_label(const prof::RankTrace& rank, prof::Lane lane, uint8_t thread);

// A span's label: its name, with the micro-batch (and chunk) for pipeline phases: F3, B3, W3, F3.c1.
std::string span_label(const prof::TraceStore& store, const prof::Span& s);

// The rows for every rank of the store, in rank order; lanes without spans are left out. `marks`: what the blame
// says of a rank (model/overlap_model.h: blamed_ranks).
std::vector<std::unique_ptr<TimelineRow>> make_timeline_rows(const prof::TraceStore& store, const prof::Report& report,
                                                             const std::map<int, std::string>& marks);

}  // namespace us::gui
