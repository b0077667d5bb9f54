#include "app/gui/widgets/timeline_rows.h"

#include <fmt/format.h>

#include <algorithm>

#include "app/gui/widgets/theme.h"

namespace us::gui {

namespace {
constexpr float kMinPx = 3.0f;        // narrower spans fold
constexpr int kMaxRows = 6;           // deeper nesting (or more concurrent transfers) is not drawn
constexpr int kMaxRowsPerThread = 4;  // the same per thread or stream when a lane shows one sub-lane each
}  // namespace

std::string span_label(const prof::TraceStore& store, const prof::Span& s) {
    if (s.kind == prof::SpanKind::phase && s.micro_batch >= 0 && s.phase != prof::Phase::optimizer)
        return fmt::format("{}{}{}", store.name(s.name), s.micro_batch,
                           s.chunk > 0 ? fmt::format(".c{}", s.chunk) : "");
    return store.name(s.name);
}

void RankHeaderRow::draw(TimelineContext& ctx, float y) {
    const ImVec2 p(ctx.x0 - 90, y + 2);
    const bool marked = !m_mark.empty();
    ctx.dl->AddText(p, marked ? kWarnColor : IM_COL32(230, 230, 235, 255), m_label.c_str());
    if (marked)
        ctx.dl->AddText(ImVec2(p.x + ImGui::CalcTextSize(m_label.c_str()).x + 10, p.y), kWarnColor,
                        ("<- " + m_mark).c_str());
    if (m_status != "ok")
        ctx.dl->AddText(ImVec2(ctx.x0 + ctx.window.width_px * 0.5f, p.y), kWarnColor, m_status.c_str());
    if (!m_clock.empty()) {
        const float w = ImGui::CalcTextSize(m_clock.c_str()).x;
        ctx.dl->AddText(ImVec2(ctx.x0 + ctx.window.width_px - w - 6, p.y), kTextDim, m_clock.c_str());
    }
}

std::string thread_label(const prof::RankTrace& rank, prof::Lane lane, uint8_t thread) {
    const bool device = lane == prof::Lane::device || lane == prof::Lane::device_comm;
    // An imported trace keeps the real ids by slot (metadata "streams" / "threads"); the engine's are slots.
    const nlohmann::json& ids = device ? rank.info.stream_ids : rank.info.thread_ids;
    if (ids.is_array() && thread < ids.size()) {
        const auto& id = ids[thread];
        return fmt::format("{} {}", device ? "stream" : "thread", id.is_string() ? id.get<std::string>() : id.dump());
    }
    return fmt::format("{} {}", device ? "stream" : "thread", thread);
}

std::vector<ThreadRows> LaneRow::groups(const prof::LaneTrack& lane) const {
    if (lane.rows_by_thread()) {
        auto by_thread = rows_by_thread(lane, kMaxRowsPerThread);
        if (by_thread.size() > 1) return by_thread;
    }
    ThreadRows all;
    for (int r = 0; r < std::min(lane.rows(), kMaxRows); ++r) all.rows.push_back(r);
    return {all};
}

float LaneRow::height(const TimelineContext& ctx) const {
    const prof::RankTrace* r = ctx.store->rank(m_rank);
    if (!r) return ctx.row_h + 2;
    float h = 0;
    for (const ThreadRows& g : groups(r->lanes[size_t(m_lane)]))
        h += float(std::max<size_t>(1, g.rows.size())) * ctx.row_h + 2;
    return h;
}

void LaneRow::draw(TimelineContext& ctx, float y) {
    const prof::RankTrace* r = ctx.store->rank(m_rank);
    if (!r) return;
    const prof::LaneTrack& lane = r->lanes[size_t(m_lane)];
    const std::vector<ThreadRows> subs = groups(lane);
    const std::string lane_name(prof::kLaneNames[size_t(m_lane)]);
    for (size_t g = 0; g < subs.size(); ++g) {
        const float h = float(std::max<size_t>(1, subs[g].rows.size())) * ctx.row_h + 2;
        if (g == 0) ctx.dl->AddText(ImVec2(ctx.x0 - 80, y), kTextDim, lane_name.c_str());
        draw_rows(ctx, lane, subs[g].rows, y, h);
        if (subs.size() > 1) {  // the sub-lane's thread or stream, over its spans' left edge
            const std::string label = thread_label(*r, m_lane, subs[g].thread);
            const ImVec2 size = ImGui::CalcTextSize(label.c_str());
            ctx.dl->AddRectFilled(ImVec2(ctx.x0, y), ImVec2(ctx.x0 + size.x + 6, y + size.y),
                                  IM_COL32(24, 26, 32, 200));
            ctx.dl->AddText(ImVec2(ctx.x0 + 3, y), kTextDim, label.c_str());
        }
        y += h;
    }
}

void LaneRow::draw_rows(TimelineContext& ctx, const prof::LaneTrack& lane, const std::vector<int>& rows, float y,
                        float h) {
    const prof::RankTrace* r = ctx.store->rank(m_rank);
    ctx.dl->AddRectFilled(ImVec2(ctx.x0, y), ImVec2(ctx.x0 + ctx.window.width_px, y + h - 1),
                          IM_COL32(24, 26, 32, 255));
    if (m_lane == r->work_lane()) {
        // idle gaps inside the work (on a traced GPU, the device's): red, under the spans
        const int64_t min_gap = int64_t(2.0 / ctx.window.px_per_ns());
        const std::vector<Gap>& gaps = ctx.derived->idle_gaps(*ctx.store, m_rank, min_gap);
        auto it = std::lower_bound(gaps.begin(), gaps.end(), ctx.window.t0,
                                   [](const Gap& g, int64_t t) { return g.end < t; });
        for (; it != gaps.end() && it->begin < ctx.window.t1; ++it)
            if (it->end - it->begin >= min_gap)
                ctx.dl->AddRectFilled(ImVec2(ctx.x0 + ctx.window.x_of(std::max(it->begin, ctx.window.t0)), y),
                                      ImVec2(ctx.x0 + ctx.window.x_of(std::min(it->end, ctx.window.t1)), y + h - 1),
                                      kIdleColor);
    }
    ctx.items.clear();
    build_lane_items(lane, ctx.window, kMinPx, ctx.items, &rows);
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    const bool pipeline = ctx.store->run_rank_metadata().grid.pp.value_or(1) > 1;
    for (const TimelineItem& it : ctx.items) {
        const float x0 = ctx.x0 + it.x0, x1 = ctx.x0 + std::max(it.x1, it.x0 + 1.0f);
        const float ya = y + float(it.row) * ctx.row_h, yb = ya + ctx.row_h - 1;
        const prof::Span& s = *it.span;
        ImU32 color = it.folded > 1 ? folded_color(op_color(s)) : op_color(s);
        if (pipeline && s.kind == prof::SpanKind::phase && s.micro_batch >= 0 && it.folded <= 1)
            color = micro_batch_color(s.micro_batch, s.phase);
        ctx.dl->AddRectFilled(ImVec2(x0, ya), ImVec2(x1, yb), color);
        if (x1 - x0 > 28) {
            const std::string label = it.folded > 1 ? fmt::format("{} spans", it.folded) : span_label(*ctx.store, s);
            ctx.dl->PushClipRect(ImVec2(x0, ya), ImVec2(x1, yb), true);
            ctx.dl->AddText(ImVec2(x0 + 3, ya), IM_COL32(15, 15, 20, 255), label.c_str());
            ctx.dl->PopClipRect();
        }
        if (mouse.x >= x0 && mouse.x < x1 && mouse.y >= ya && mouse.y < yb) {
            ctx.hovered = &s;
            ctx.hovered_folded = it.folded;
            ctx.hovered_rank = m_rank;
        }
    }
}

std::vector<std::unique_ptr<TimelineRow>> make_timeline_rows(const prof::TraceStore& store, const prof::Report& report,
                                                             const std::map<int, std::string>& marks) {
    std::vector<std::unique_ptr<TimelineRow>> rows;
    for (int r : store.ranks()) {
        const prof::RankTrace& rt = *store.rank(r);
        std::string label = fmt::format("rank {}", r), status = "ok", clock;
        for (const auto& rr : report.ranks)
            if (rr.rank == r) {
                label = rr.label;
                status = rr.status;
                if (rr.clock_offset_ns != 0 || rr.clock_uncertainty_ns != 0)
                    clock = fmt::format("clock {:+.3f} ms vs rank 0, aligned to +- {:.1f} us (measured, ping-pong)",
                                        double(rr.clock_offset_ns) / 1e6, double(rr.clock_uncertainty_ns) / 1e3);
            }
        const auto mark = marks.find(r);
        rows.push_back(
            std::make_unique<RankHeaderRow>(r, label, status, mark != marks.end() ? mark->second : "", clock));
        for (int lane = 0; lane < int(prof::Lane::count); ++lane)
            if (!rt.lanes[size_t(lane)].spans().empty() || prof::Lane(lane) == prof::Lane::compute)
                rows.push_back(std::make_unique<LaneRow>(r, prof::Lane(lane)));
    }
    return rows;
}

}  // namespace us::gui
