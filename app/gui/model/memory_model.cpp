#include "app/gui/model/memory_model.h"

#include <algorithm>

namespace us::gui {

std::vector<MemoryColumn> build_memory_columns(const std::vector<prof::MemorySample>& tl, int64_t t0, int64_t t1,
                                               int width) {
    std::vector<MemoryColumn> cols(size_t(std::max(0, width)));
    if (tl.empty() || width <= 0 || t1 <= t0) return cols;
    const double ns_per_px = double(t1 - t0) / width;
    auto total_of = [](const prof::MemorySample& s) {
        int64_t t = 0;
        for (int64_t b : s.bytes) t += b;
        return t;
    };
    // The first sample at or after t0; the one before it is in effect at t0.
    size_t i =
        size_t(std::lower_bound(tl.begin(), tl.end(), t0, [](auto& s, int64_t t) { return s.t < t; }) - tl.begin());
    const prof::MemorySample* current = i > 0 ? &tl[i - 1] : nullptr;
    for (int x = 0; x < width; ++x) {
        const int64_t end = t0 + int64_t(ns_per_px * (x + 1));
        const prof::MemorySample* best = current;
        int64_t best_total = best ? total_of(*best) : -1;
        for (; i < tl.size() && tl[i].t < end; ++i) {
            const int64_t t = total_of(tl[i]);
            if (t > best_total) {
                best_total = t;
                best = &tl[i];
            }
            current = &tl[i];
        }
        if (!best) continue;
        MemoryColumn& c = cols[size_t(x)];
        c.bytes = best->bytes;
        c.total = best_total;
        c.phase = best->phase;
        c.step = best->step;
        c.has_data = true;
    }
    return cols;
}

void fill_process_columns(std::vector<MemoryColumn>& cols, const std::vector<prof::ProcessSample>& tl, int64_t t0,
                          int64_t t1) {
    const int width = int(cols.size());
    if (tl.empty() || width == 0 || t1 <= t0) return;
    const double ns_per_px = double(t1 - t0) / width;
    size_t i =
        size_t(std::lower_bound(tl.begin(), tl.end(), t0, [](auto& s, int64_t t) { return s.t < t; }) - tl.begin());
    const prof::ProcessSample* current = i > 0 ? &tl[i - 1] : nullptr;
    for (int x = 0; x < width; ++x) {
        const int64_t end = t0 + int64_t(ns_per_px * (x + 1));
        const prof::ProcessSample* best = current;
        for (; i < tl.size() && tl[i].t < end; ++i) {
            if (!best || tl[i].untracked() > best->untracked()) best = &tl[i];
            current = &tl[i];
        }
        if (!best || best->held() < 0) continue;
        cols[size_t(x)].held = best->held();
        cols[size_t(x)].cached = best->cached();
    }
}

// Phases are the outermost spans of the compute lane: its first row, searched by binary search.
std::vector<PhaseBand> phase_bands(const prof::RankTrace& rank, int64_t t0, int64_t t1) {
    std::vector<PhaseBand> out;
    const auto& lane = rank.lanes[size_t(prof::Lane::compute)];
    if (lane.rows() == 0) return out;
    const auto [first, last] = lane.visible(0, t0, t1);
    for (size_t i = first; i < last; ++i) {
        const prof::Span& s = lane.spans()[lane.row(0)[i]];
        if (s.kind == prof::SpanKind::phase) out.push_back({s.begin, s.end, s.phase, s.micro_batch});
    }
    return out;
}

std::vector<std::pair<int64_t, int>> step_marks(const prof::RankTrace& rank, int64_t t0, int64_t t1) {
    std::vector<std::pair<int64_t, int>> out;
    for (const auto& s : rank.lanes[size_t(prof::Lane::host)].spans())
        if (s.kind == prof::SpanKind::step && s.begin >= t0 && s.begin < t1) out.emplace_back(s.begin, s.step);
    return out;
}

const prof::MemorySample* sample_at(const std::vector<prof::MemorySample>& tl, int64_t t) {
    auto it = std::upper_bound(tl.begin(), tl.end(), t, [](int64_t v, auto& s) { return v < s.t; });
    return it == tl.begin() ? nullptr : &*(it - 1);
}

}  // namespace us::gui
