// The snapshot's analysis (snapshot_analysis.h). One pass over each device's trace records when each traced
// allocation and segment ends, the running totals relative to the trace's start, the peak and the OOMs; the start is
// then the dump-time state minus the trace's net change, and the peak's live set is rebuilt from the ends recorded.
#include "profiler/snapshot/snapshot_analysis.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "common/core/check.h"

namespace us::snap {

const char* origin_name(AllocationOrigin o) {
    switch (o) {
        case AllocationOrigin::traced:
            return "traced";
        case AllocationOrigin::before_trace_freed_in_it:
            return "before the trace, freed in it";
        case AllocationOrigin::before_trace_alive_at_dump:
            return "before the trace, alive at dump";
    }
    return "?";
}

namespace {

constexpr uint32_t never = UINT32_MAX;

// Sums of sizes a hostile file could push past int64: refused rather than wrapped.
int64_t sum(const MemorySnapshot& snap, int64_t a, int64_t b) {
    int64_t out = 0;
    if (__builtin_add_overflow(a, b, &out))
        fail_user("{}: sizes add up past 2^63 bytes: not a real memory snapshot", snap.source);
    return out;
}

struct Interval {
    uint64_t begin, end;
};

// The dump-time state of one device from its segments.
void read_dump_state(const MemorySnapshot& snap, DeviceMemory& m) {
    for (const SnapshotSegment& seg : snap.segments) {
        if (seg.device != m.device) continue;
        ++m.segments;
        m.reserved_bytes = sum(snap, m.reserved_bytes, seg.total_size);
        for (uint32_t b = seg.block_begin; b < seg.block_begin + seg.block_count; ++b) {
            const SnapshotBlock& block = snap.blocks[b];
            if (block.state == BlockState::active_allocated)
                m.allocated_bytes = sum(snap, m.allocated_bytes, block.size);
            if (block.state == BlockState::active_allocated || block.state == BlockState::active_awaiting_free)
                m.active_bytes = sum(snap, m.active_bytes, block.size);
            else if (block.state == BlockState::inactive)
                m.largest_free_block_at_dump = std::max(m.largest_free_block_at_dump, block.size);
        }
    }
}

// The largest run of free bytes inside any segment, given the segments and the blocks alive at one moment. Live
// blocks do not overlap, so sorted by start they are sorted by end too; a block may cross from one mapped piece of
// an expandable segment into the next, so each segment looks at every block that reaches into it.
int64_t largest_free_gap(std::vector<Interval> segments, std::vector<Interval> blocks) {
    std::sort(blocks.begin(), blocks.end(), [](auto& a, auto& b) { return a.begin < b.begin; });
    int64_t largest = 0;
    for (const Interval& seg : segments) {
        auto k =
            std::partition_point(blocks.begin(), blocks.end(), [&](const Interval& b) { return b.end <= seg.begin; });
        uint64_t cursor = seg.begin;
        for (; k != blocks.end() && k->begin < seg.end; ++k) {
            if (k->begin > cursor) largest = std::max(largest, int64_t(k->begin - cursor));
            cursor = std::max(cursor, k->end);
        }
        if (cursor < seg.end) largest = std::max(largest, int64_t(seg.end - cursor));
    }
    return largest;
}

// What one pass over a device's trace leaves: when each traced allocation and segment ended, what is still live,
// the frees of what began before the trace, and the running totals (relative to the trace's start) with their peak.
struct TraceReplay {
    std::vector<uint32_t> ends;  // ends[i]: the entry that ended allocation or segment i (never: alive at dump)
    std::unordered_map<uint64_t, uint32_t> live_allocs, live_segments;
    std::vector<uint32_t> orphan_frees, orphan_segment_frees;  // ends of what began before the trace
    int64_t allocated = 0, reserved = 0, peak = 0, peak_reserved = 0, reserved_at_peak = 0;
    int64_t peak_entry = -1;
    size_t double_allocs = 0;
};

// Step one: entry i's change to the live sets and the running totals (an OOM is recorded as it happens).
void apply_entry(const MemorySnapshot& snap, const std::vector<TraceEntry>& trace, size_t i, TraceReplay& r,
                 DeviceMemory& m) {
    const TraceEntry& e = trace[i];
    switch (e.action) {
        case TraceAction::alloc: {
            auto [it, fresh] = r.live_allocs.try_emplace(e.addr, uint32_t(i));
            if (!fresh) {
                ++r.double_allocs, r.allocated = sum(snap, r.allocated, -trace[it->second].size);
                r.ends[it->second] = uint32_t(i), it->second = uint32_t(i);
            }
            r.allocated = sum(snap, r.allocated, e.size);
            break;
        }
        case TraceAction::free_completed: {
            if (auto it = r.live_allocs.find(e.addr); it != r.live_allocs.end()) {
                r.allocated = sum(snap, r.allocated, -trace[it->second].size);
                r.ends[it->second] = uint32_t(i);
                r.live_allocs.erase(it);
            } else {
                r.allocated = sum(snap, r.allocated, -e.size);
                r.orphan_frees.push_back(uint32_t(i));
            }
            break;
        }
        case TraceAction::segment_alloc:
        case TraceAction::segment_map:
            r.live_segments[e.addr] = uint32_t(i);
            r.reserved = sum(snap, r.reserved, e.size);
            break;
        case TraceAction::segment_free:
        case TraceAction::segment_unmap: {
            if (auto it = r.live_segments.find(e.addr); it != r.live_segments.end()) {
                r.ends[it->second] = uint32_t(i);
                r.live_segments.erase(it);
            } else {
                r.orphan_segment_frees.push_back(uint32_t(i));
            }
            r.reserved = sum(snap, r.reserved, -e.size);
            break;
        }
        case TraceAction::oom:
            m.ooms.push_back({i, e.time_us, e.size, e.device_free, r.allocated, r.reserved});
            break;
        default:
            break;
    }
}

// Step one's loop: every entry applied in order, the peak followed and the timeline's slices filled.
TraceReplay replay_entries(const MemorySnapshot& snap, const std::vector<TraceEntry>& trace, DeviceMemory& m,
                           size_t samples) {
    const size_t n = trace.size();
    TraceReplay r;
    r.ends.assign(n, never);
    r.live_allocs.reserve(1024);
    const size_t buckets = std::max<size_t>(1, std::min(samples, n));
    m.timeline.assign(buckets, TimelineSample{});
    for (size_t i = 0; i < n; ++i) {
        const TraceEntry& e = trace[i];
        apply_entry(snap, trace, i, r, m);
        if (r.allocated > r.peak) r.peak = r.allocated, r.peak_entry = int64_t(i), r.reserved_at_peak = r.reserved;
        r.peak_reserved = std::max(r.peak_reserved, r.reserved);
        TimelineSample& s = m.timeline[i * buckets / n];
        s.last_entry = i, s.time_us = e.time_us;
        s.allocated = std::max(s.allocated, r.allocated), s.reserved = std::max(s.reserved, r.reserved);
    }
    return r;
}

// Step two: the trace's start (the dump-time state minus what the trace did), and the peak, OOMs and timeline moved
// from relative to absolute figures.
void place_on_start(const MemorySnapshot& snap, const std::vector<TraceEntry>& trace, const TraceReplay& r,
                    DeviceMemory& m) {
    if (r.double_allocs)
        m.notes.push_back(
            fmt::format("{} allocations at an address still allocated in the trace (a lost free): the "
                        "earlier one counted as freed",
                        r.double_allocs));
    m.start_allocated = sum(snap, m.active_bytes, -r.allocated);
    m.start_reserved = sum(snap, m.reserved_bytes, -r.reserved);
    if (m.start_allocated < 0 || m.start_reserved < 0) {
        m.start_known = false;
        m.notes.push_back(
            fmt::format("the trace adds {} B allocated and {} B reserved but the dump holds only {} B "
                        "and {} B: the state before the trace is unknown (figures assume it was empty)",
                        r.allocated, r.reserved, m.active_bytes, m.reserved_bytes));
        m.start_allocated = std::max<int64_t>(0, m.start_allocated),
        m.start_reserved = std::max<int64_t>(0, m.start_reserved);
    }
    m.peak_allocated = sum(snap, m.start_allocated, r.peak);
    m.reserved_at_peak = sum(snap, m.start_reserved, r.peak_entry < 0 ? 0 : r.reserved_at_peak);
    m.peak_reserved = sum(snap, m.start_reserved, r.peak_reserved);
    m.free_in_segments_at_peak = sum(snap, m.reserved_at_peak, -m.peak_allocated);
    m.peak_entry = r.peak_entry;
    m.peak_time_us = r.peak_entry < 0 ? -1 : trace[size_t(r.peak_entry)].time_us;
    for (OomEvent& o : m.ooms)
        o.allocated = sum(snap, o.allocated, m.start_allocated), o.reserved = sum(snap, o.reserved, m.start_reserved);
    for (TimelineSample& t : m.timeline)
        t.allocated = sum(snap, t.allocated, m.start_allocated), t.reserved = sum(snap, t.reserved, m.start_reserved);
}

// Step three: the live set at the peak (traced allocations begun by then and ended after, what began before the
// trace and ends after the peak, and what the dump holds that no traced allocation explains) and the segments
// around it, from which the largest free block at the peak follows.
void rebuild_peak_live_set(const MemorySnapshot& snap, const std::vector<TraceEntry>& trace, const TraceReplay& r,
                           DeviceMemory& m) {
    const int64_t peak_entry = r.peak_entry;
    const auto after_peak = [&](uint32_t end) { return end == never || int64_t(end) > peak_entry; };
    std::vector<Interval> segments_at_peak;
    int64_t before_trace = 0;
    for (size_t i = 0; int64_t(i) <= peak_entry; ++i) {
        const TraceEntry& e = trace[i];
        if (e.action == TraceAction::alloc && after_peak(r.ends[i]))
            m.at_peak.push_back({e.addr, e.size, e.stack, -1, MemoryCategory::unknown, AllocationOrigin::traced});
        if ((e.action == TraceAction::segment_alloc || e.action == TraceAction::segment_map) && after_peak(r.ends[i]))
            segments_at_peak.push_back({e.addr, e.addr + uint64_t(e.size)});
    }
    for (const uint32_t i : r.orphan_frees) {
        before_trace = sum(snap, before_trace, trace[i].size);
        if (int64_t(i) > peak_entry)
            m.at_peak.push_back({trace[i].addr, trace[i].size, trace[i].stack, -1, MemoryCategory::unknown,
                                 AllocationOrigin::before_trace_freed_in_it});
    }
    for (const uint32_t i : r.orphan_segment_frees)
        if (int64_t(i) > peak_entry)
            segments_at_peak.push_back({trace[i].addr, trace[i].addr + uint64_t(trace[i].size)});
    for (const SnapshotSegment& seg : snap.segments) {
        if (seg.device != m.device) continue;
        if (!r.live_segments.contains(seg.address))
            segments_at_peak.push_back({seg.address, seg.address + uint64_t(seg.total_size)});
        for (uint32_t b = seg.block_begin; b < seg.block_begin + seg.block_count; ++b) {
            const SnapshotBlock& block = snap.blocks[b];
            if (block.state == BlockState::inactive || block.state == BlockState::unknown) continue;
            if (r.live_allocs.contains(block.address)) continue;
            before_trace = sum(snap, before_trace, block.size);
            m.at_peak.push_back({block.address, block.size, block.stack, -1, MemoryCategory::unknown,
                                 AllocationOrigin::before_trace_alive_at_dump});
        }
    }
    if (m.start_known && before_trace != m.start_allocated)
        m.notes.push_back(
            fmt::format("the allocations known from before the trace sum to {} B, not the {} B the "
                        "dump-time state implies: some of the peak's allocations are not attributed",
                        before_trace, m.start_allocated));
    std::vector<Interval> blocks_at_peak;
    blocks_at_peak.reserve(m.at_peak.size());
    for (const PeakAllocation& a : m.at_peak) blocks_at_peak.push_back({a.addr, a.addr + uint64_t(a.size)});
    m.largest_free_block_at_peak = largest_free_gap(std::move(segments_at_peak), std::move(blocks_at_peak));
}

// The device's trace replayed: its totals over time, its start and peak, and the live set at the peak.
void replay_trace(const MemorySnapshot& snap, DeviceMemory& m, size_t samples) {
    const std::vector<TraceEntry>& trace = snap.device_traces[size_t(m.device)];
    m.trace_entries = trace.size();
    m.has_trace = true;
    const TraceReplay r = replay_entries(snap, trace, m, samples);
    place_on_start(snap, trace, r, m);
    rebuild_peak_live_set(snap, trace, r, m);
}

// Sites and categories of the allocations alive at the peak.
void summarize_peak(const MemorySnapshot& snap, DeviceMemory& m) {
    std::sort(m.at_peak.begin(), m.at_peak.end(), [](auto& a, auto& b) { return a.size > b.size; });
    std::unordered_map<uint32_t, std::pair<int64_t, MemoryCategory>> by_stack;  // stacks repeat: rules run once each
    std::map<int64_t, size_t> site_index;
    std::vector<CategoryTotal> totals(size_t(MemoryCategory::unknown) + 1);
    for (PeakAllocation& a : m.at_peak) {
        auto it = by_stack.find(a.stack);
        if (it == by_stack.end())
            it = by_stack.emplace(a.stack, std::make_pair(user_frame(snap, a.stack), categorize_stack(snap, a.stack)))
                     .first;
        a.user_frame = it->second.first, a.category = it->second.second;
        auto [s, fresh] = site_index.try_emplace(a.user_frame, m.sites.size());
        if (fresh) m.sites.push_back({a.user_frame, 0, 0, a.category});
        m.sites[s->second].bytes = sum(snap, m.sites[s->second].bytes, a.size), ++m.sites[s->second].count;
        CategoryTotal& t = totals[size_t(a.category)];
        t.category = a.category, t.bytes = sum(snap, t.bytes, a.size), ++t.count;
    }
    std::sort(m.sites.begin(), m.sites.end(), [](auto& a, auto& b) { return a.bytes > b.bytes; });
    for (const CategoryTotal& t : totals)
        if (t.count > 0) m.categories.push_back(t);
}

}  // namespace

SnapshotAnalysis analyze_snapshot(const MemorySnapshot& snap, size_t timeline_samples) {
    std::set<int> devices;
    for (const SnapshotSegment& seg : snap.segments) devices.insert(seg.device);
    for (size_t d = 0; d < snap.device_traces.size(); ++d)
        if (!snap.device_traces[d].empty()) devices.insert(int(d));
    SnapshotAnalysis out;
    for (const int d : devices) {
        DeviceMemory m;
        m.device = d;
        read_dump_state(snap, m);
        if (size_t(d) < snap.device_traces.size() && !snap.device_traces[size_t(d)].empty()) {
            replay_trace(snap, m, timeline_samples);
            summarize_peak(snap, m);
            out.peak_known = true;
            out.peak_allocated_bytes = sum(snap, out.peak_allocated_bytes, m.peak_allocated);
        } else {
            m.notes.push_back(snap.has_traces ? "no trace entries for this device: nothing over time is known"
                                              : "no device_traces (recorded without _record_memory_history): only the "
                                                "dump-time state is known");
        }
        out.reserved_bytes = sum(snap, out.reserved_bytes, m.reserved_bytes);
        out.allocated_bytes = sum(snap, out.allocated_bytes, m.allocated_bytes);
        out.active_bytes = sum(snap, out.active_bytes, m.active_bytes);
        out.segments += m.segments, out.trace_entries += m.trace_entries;
        out.devices.push_back(std::move(m));
    }
    return out;
}

}  // namespace us::snap
