#include "app/gui/model/timeline_model.h"

#include <algorithm>

namespace us::gui {

std::vector<ThreadRows> rows_by_thread(const prof::LaneTrack& lane, int max_rows) {
    std::vector<ThreadRows> groups;
    for (int r = 0; r < lane.rows(); ++r) {
        if (lane.row(r).empty()) continue;
        const uint8_t t = lane.row_thread(r);
        auto it = std::find_if(groups.begin(), groups.end(), [&](const ThreadRows& g) { return g.thread == t; });
        if (it == groups.end()) {
            groups.push_back({t, {}});
            it = groups.end() - 1;
        }
        if (int(it->rows.size()) < max_rows) it->rows.push_back(r);
    }
    std::sort(groups.begin(), groups.end(),
              [](const ThreadRows& a, const ThreadRows& b) { return a.thread < b.thread; });
    return groups;
}

void build_lane_items(const prof::LaneTrack& lane, const TimeWindow& w, float min_px, std::vector<TimelineItem>& out,
                      const std::vector<int>* rows) {
    const auto& spans = lane.spans();
    const double scale = w.px_per_ns();
    const int64_t min_ns = std::max<int64_t>(1, int64_t(double(min_px) / scale));
    const int row_count = rows ? int(rows->size()) : lane.rows();
    for (int shown = 0; shown < row_count; ++shown) {
        const int r = rows ? (*rows)[size_t(shown)] : shown;
        const auto& idx = lane.row(r);
        auto [i, last] = lane.visible(r, w.t0, w.t1);
        while (i < last) {
            const prof::Span& s = spans[idx[i]];
            TimelineItem item;
            item.row = shown;
            item.span = &s;
            item.x0 = w.x_of(std::max(s.begin, w.t0));
            item.x1 = w.x_of(std::min(s.end, w.t1));
            if (s.end - s.begin >= min_ns) {
                out.push_back(item);
                ++i;
                continue;
            }
            // Fold: take every span that starts before the fold's right edge plus one minimum width, and keep
            // going while the next one is narrow and close; each extension is one binary search in the row.
            int64_t fold_end = s.end;
            size_t j = i;
            for (;;) {
                const int64_t limit = fold_end + min_ns;
                const auto it =
                    std::partition_point(idx.begin() + std::ptrdiff_t(j), idx.begin() + std::ptrdiff_t(last),
                                         [&](uint32_t k) { return spans[k].begin < limit; });
                size_t k = size_t(it - idx.begin());
                // Within a row spans do not overlap, so of those starting before `limit` only the last can be wide
                // (a wide one further left would end past it). A wide span is never folded.
                if (k > j && spans[idx[k - 1]].end - spans[idx[k - 1]].begin >= min_ns) --k;
                if (k == j) break;
                fold_end = std::max(fold_end, spans[idx[k - 1]].end);
                j = k;
                if (j >= last) break;
                const prof::Span& next = spans[idx[j]];
                if (next.end - next.begin >= min_ns) break;
            }
            item.x1 = w.x_of(std::min(fold_end, w.t1));
            item.folded = uint32_t(j - i);
            out.push_back(item);
            i = j;
        }
    }
}

std::vector<Gap> idle_gaps(const prof::LaneTrack& compute, int64_t t0, int64_t t1, int64_t min_ns) {
    std::vector<Gap> gaps;
    int64_t cursor = t0;
    const auto& spans = compute.spans();
    auto it = std::lower_bound(spans.begin(), spans.end(), t0 - compute.max_duration(),
                               [](const prof::Span& s, int64_t t) { return s.begin < t; });
    for (; it != spans.end() && it->begin < t1; ++it) {
        if (it->kind != prof::SpanKind::op || it->end <= cursor) continue;
        if (it->begin - cursor >= min_ns) gaps.push_back({cursor, it->begin});
        cursor = std::max(cursor, it->end);
    }
    return gaps;
}

}  // namespace us::gui
