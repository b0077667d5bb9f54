// Running totals of a snapshot's trace and their re-sampling for a window (snapshot_series.h). The replay follows
// snapshot_analysis.cpp's: allocated rises at alloc and falls at free_completed, reserved follows the segments.
#include "profiler/snapshot/snapshot_series.h"

#include <algorithm>
#include <unordered_map>

namespace us::snap {

namespace {
// The running sums of one category. The analysis refuses a file whose totals pass 2^63, but a hostile file can
// still push one category past it while another goes as far below: saturate rather than overflow.
void add(int64_t& a, int64_t b) {
    if (__builtin_add_overflow(a, b, &a)) a = b > 0 ? INT64_MAX : INT64_MIN;
}
}  // namespace

SnapshotSeries build_series(const MemorySnapshot& snap, const DeviceMemory& m) {
    SnapshotSeries s;
    s.device = m.device;
    if (!m.has_trace || size_t(m.device) >= snap.device_traces.size()) return s;
    const std::vector<TraceEntry>& trace = snap.device_traces[size_t(m.device)];
    const size_t n = trace.size();
    s.allocated.resize(n), s.reserved.resize(n), s.delta.resize(n), s.category.resize(n);
    std::unordered_map<uint32_t, uint8_t> by_stack;  // stacks repeat: the rules run once per stack
    auto category_of = [&](uint32_t stack) {
        auto it = by_stack.find(stack);
        if (it == by_stack.end()) it = by_stack.emplace(stack, uint8_t(categorize_stack(snap, stack))).first;
        return it->second;
    };
    struct Live {
        int64_t size;
        uint8_t category;
    };
    std::unordered_map<uint64_t, Live> live;
    CategoryBytes orphans{};  // freed in the trace, allocated before it
    int64_t allocated = m.start_allocated, reserved = m.start_reserved;
    for (size_t i = 0; i < n; ++i) {
        const TraceEntry& e = trace[i];
        int64_t d = 0;
        uint8_t c = uint8_t(MemoryCategory::unknown);
        switch (e.action) {
            case TraceAction::alloc: {
                c = category_of(e.stack), d = e.size;
                // A lost free (an address allocated twice): the earlier one counts as freed, as in the analysis; its
                // bytes leave the new allocation's category (the totals stay exact, the split is off by it).
                if (auto it = live.find(e.addr); it != live.end())
                    add(d, it->second.size == INT64_MIN ? INT64_MAX : -it->second.size);
                live[e.addr] = {e.size, c};
                break;
            }
            case TraceAction::free_completed:
                if (auto it = live.find(e.addr); it != live.end()) {
                    d = it->second.size == INT64_MIN ? INT64_MAX : -it->second.size, c = it->second.category;
                    live.erase(it);
                } else {  // allocated before the trace: torch records the allocating stack on the free
                    d = e.size == INT64_MIN ? INT64_MAX : -e.size, c = category_of(e.stack);
                    add(orphans[c], e.size);
                }
                break;
            case TraceAction::segment_alloc:
            case TraceAction::segment_map:
                add(reserved, e.size);
                break;
            case TraceAction::segment_free:
            case TraceAction::segment_unmap:
                add(reserved, e.size == INT64_MIN ? INT64_MAX : -e.size);
                break;
            default:
                break;
        }
        add(allocated, d);
        s.allocated[i] = allocated, s.reserved[i] = reserved, s.delta[i] = d, s.category[i] = c;
    }
    // The start by category: the orphans, then the dump's blocks no traced allocation explains, the rest unknown.
    s.start = orphans;
    for (const SnapshotSegment& seg : snap.segments) {
        if (seg.device != m.device) continue;
        for (uint32_t b = seg.block_begin; b < seg.block_begin + seg.block_count; ++b) {
            const SnapshotBlock& block = snap.blocks[b];
            if (block.state == BlockState::inactive || block.state == BlockState::unknown ||
                live.contains(block.address))
                continue;
            add(s.start[category_of(block.stack)], block.size);
        }
    }
    int64_t explained = 0;
    for (int64_t v : s.start) add(explained, v);
    add(s.start[size_t(MemoryCategory::unknown)],
        std::max<int64_t>(0, explained < 0 ? m.start_allocated : m.start_allocated - explained));
    CategoryBytes now = s.start;
    for (size_t i = 0; i < n; ++i) {
        if (i % SnapshotSeries::kCheckpointEvery == 0) s.checkpoints.push_back(now);
        add(now[s.category[i]], s.delta[i]);
    }
    return s;
}

CategoryBytes category_peaks(const SnapshotSeries& s) {
    CategoryBytes now = s.start, peak = s.start;
    for (size_t i = 0; i < s.size(); ++i) {
        add(now[s.category[i]], s.delta[i]);
        peak[s.category[i]] = std::max(peak[s.category[i]], now[s.category[i]]);
    }
    return peak;
}

std::vector<SeriesSample> sample_window(const SnapshotSeries& s, size_t e0, size_t e1, size_t buckets) {
    e1 = std::min(e1, s.size());
    if (e0 >= e1 || buckets == 0) return {};
    const size_t n = e1 - e0;
    buckets = std::min(buckets, n);
    std::vector<SeriesSample> out(buckets);
    const size_t k = e0 / SnapshotSeries::kCheckpointEvery;
    CategoryBytes now = s.checkpoints[k];
    for (size_t i = k * SnapshotSeries::kCheckpointEvery; i < e0; ++i) add(now[s.category[i]], s.delta[i]);
    size_t b_prev = SIZE_MAX;
    for (size_t i = e0; i < e1; ++i) {
        add(now[s.category[i]], s.delta[i]);
        const size_t b = (i - e0) * buckets / n;
        SeriesSample& x = out[b];
        if (b != b_prev) {
            x.first_entry = i, x.allocated = INT64_MIN, x.reserved = INT64_MIN;
            b_prev = b;
        }
        x.last_entry = i;
        x.reserved = std::max(x.reserved, s.reserved[i]);
        if (s.allocated[i] > x.allocated) x.allocated = s.allocated[i], x.peak_entry = i, x.by_category = now;
    }
    return out;
}

}  // namespace us::snap
