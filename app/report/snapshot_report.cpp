// The memory snapshot report (snapshot_report.h): per rank and device, the dump-time state (measured by the
// allocator), the trace's timeline (replayed, its start derived), the peak's allocations by site and by inferred
// category, fragmentation and OOMs. Every figure says where it comes from.
#include "app/report/snapshot_report.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdio>

#include "common/core/check.h"
#include "common/core/format.h"
#include "profiler/snapshot/snapshot_series.h"

namespace us::app {
namespace {

using namespace us::snap;
constexpr size_t top_n = 10;

nlohmann::json or_null(int64_t v, bool known) { return known ? nlohmann::json(v) : nlohmann::json(nullptr); }

nlohmann::json stack_json(const MemorySnapshot& s, uint32_t stack, size_t max_frames = 8) {
    nlohmann::json frames = nlohmann::json::array();
    for (const uint32_t id : s.stack(stack)) {
        if (frames.size() == max_frames) break;
        const SnapshotFrame& f = s.frame(id);
        frames.push_back({{"filename", f.filename}, {"line", f.line}, {"name", f.name}});
    }
    return frames;
}

// The trace's timeline: its start (derived), its peak, its end (the dump) and its samples.
nlohmann::json timeline_json(const DeviceMemory& m) {
    nlohmann::json samples = nlohmann::json::array();
    for (const TimelineSample& t : m.timeline)
        samples.push_back({{"last_entry", t.last_entry},
                           {"time_us", or_null(t.time_us, t.time_us >= 0)},
                           {"max_allocated_bytes", t.allocated},
                           {"max_reserved_bytes", t.reserved}});
    return {{"start_basis", m.start_known ? "derived (dump-time state minus the trace's net change)" : "unknown"},
            {"start_allocated_bytes", or_null(m.start_allocated, m.start_known)},
            {"start_reserved_bytes", or_null(m.start_reserved, m.start_known)},
            {"peak_allocated_bytes", m.peak_allocated},
            {"peak_entry", m.peak_entry},
            {"peak_time_us", or_null(m.peak_time_us, m.peak_time_us >= 0)},
            {"reserved_at_peak_bytes", m.reserved_at_peak},
            {"peak_reserved_bytes", m.peak_reserved},
            {"end_allocated_bytes", m.active_bytes},
            {"end_reserved_bytes", m.reserved_bytes},
            {"samples", samples}};
}

// The allocated bytes by inferred category over the trace (snapshot_series.h), at the same slices as the samples.
nlohmann::json categories_over_time_json(const MemorySnapshot& s, const DeviceMemory& m) {
    const SnapshotSeries series = build_series(s, m);
    nlohmann::json by_time = nlohmann::json::array();
    for (const SeriesSample& x : sample_window(series, 0, series.size(), m.timeline.size())) {
        nlohmann::json c = nlohmann::json::object();
        for (size_t k = 0; k < kSnapshotCategories; ++k) c[category_name(MemoryCategory(k))] = x.by_category[k];
        by_time.push_back({{"last_entry", x.last_entry},
                           {"entry", x.peak_entry},
                           {"allocated_bytes", x.allocated},
                           {"by_category", c}});
    }
    const CategoryBytes own_peaks = category_peaks(series);
    nlohmann::json peaks = nlohmann::json::object();
    for (size_t k = 0; k < kSnapshotCategories; ++k) peaks[category_name(MemoryCategory(k))] = own_peaks[k];
    return {{"basis", "inferred from the frames (else unknown)"}, {"peak_bytes", peaks}, {"samples", by_time}};
}

// What was held at the peak: the largest allocations, the sites and the categories.
void at_peak_json(const MemorySnapshot& s, const DeviceMemory& m, nlohmann::json& d) {
    nlohmann::json top = nlohmann::json::array();
    for (size_t i = 0; i < std::min(top_n, m.at_peak.size()); ++i) {
        const PeakAllocation& a = m.at_peak[i];
        top.push_back({{"addr", a.addr},
                       {"size", a.size},
                       {"site", frame_label(s, a.user_frame)},
                       {"category", category_name(a.category)},
                       {"basis", category_basis(a.category)},
                       {"known_from", origin_name(a.origin)},
                       {"frames", stack_json(s, a.stack)}});
    }
    d["top_allocations_at_peak"] = top;
    d["allocations_at_peak"] = m.at_peak.size();
    nlohmann::json sites = nlohmann::json::array();
    for (size_t i = 0; i < std::min(top_n, m.sites.size()); ++i)
        sites.push_back({{"site", frame_label(s, m.sites[i].frame)},
                         {"bytes", m.sites[i].bytes},
                         {"count", m.sites[i].count},
                         {"category", category_name(m.sites[i].category)},
                         {"basis", category_basis(m.sites[i].category)}});
    d["sites_at_peak"] = sites;
    nlohmann::json cats = nlohmann::json::array();
    for (const CategoryTotal& c : m.categories)
        cats.push_back({{"category", category_name(c.category)},
                        {"basis", category_basis(c.category)},
                        {"bytes", c.bytes},
                        {"count", c.count}});
    d["categories_at_peak"] = cats;
}

nlohmann::json ooms_json(const DeviceMemory& m) {
    nlohmann::json ooms = nlohmann::json::array();
    for (const OomEvent& o : m.ooms)
        ooms.push_back({{"entry", o.entry},
                        {"time_us", or_null(o.time_us, o.time_us >= 0)},
                        {"requested_bytes", o.requested},
                        {"device_free_bytes", or_null(o.device_free, o.device_free >= 0)},
                        {"allocated_bytes", o.allocated},
                        {"reserved_bytes", o.reserved}});
    return ooms;
}

nlohmann::json device_json(const MemorySnapshot& s, const DeviceMemory& m) {
    nlohmann::json d = {{"device", m.device},
                        {"reserved_bytes", m.reserved_bytes},
                        {"allocated_bytes", m.allocated_bytes},
                        {"active_bytes", m.active_bytes},
                        {"segments", m.segments},
                        {"largest_free_block_at_dump", m.largest_free_block_at_dump},
                        {"trace_entries", m.trace_entries},
                        {"notes", m.notes}};
    if (!m.has_trace) {
        d["peak_allocated_bytes"] = nullptr;
        return d;
    }
    d["peak_allocated_bytes"] = m.peak_allocated;
    d["timeline"] = timeline_json(m);
    d["categories_over_time"] = categories_over_time_json(s, m);
    d["fragmentation"] = {
        {"reserved_minus_allocated_at_peak", m.free_in_segments_at_peak},
        {"largest_free_block_at_peak", or_null(m.largest_free_block_at_peak, m.largest_free_block_at_peak >= 0)}};
    at_peak_json(s, m, d);
    d["oom_events"] = ooms_json(m);
    return d;
}

}  // namespace

nlohmann::json snapshot_report_json(const std::vector<RankSnapshot>& ranks) {
    nlohmann::json out = nlohmann::json::array();
    int64_t reserved = 0, allocated = 0, active = 0, peak = 0;
    size_t segments = 0, entries = 0;
    bool peak_known = !ranks.empty();
    for (const RankSnapshot& r : ranks) {
        const SnapshotAnalysis& a = r.analysis;
        nlohmann::json devices = nlohmann::json::array();
        for (const DeviceMemory& m : a.devices) devices.push_back(device_json(*r.snapshot, m));
        out.push_back({{"file", r.snapshot->source},
                       {"rank", r.snapshot->rank >= 0 ? nlohmann::json(r.snapshot->rank) : nlohmann::json(nullptr)},
                       {"reserved_bytes", a.reserved_bytes},
                       {"allocated_bytes", a.allocated_bytes},
                       {"active_bytes", a.active_bytes},
                       {"segments", a.segments},
                       {"trace_entries", a.trace_entries},
                       {"peak_allocated_bytes", or_null(a.peak_allocated_bytes, a.peak_known)},
                       {"devices", devices},
                       {"warnings", r.snapshot->warnings}});
        reserved += a.reserved_bytes, allocated += a.allocated_bytes, active += a.active_bytes;
        segments += a.segments, entries += a.trace_entries, peak += a.peak_allocated_bytes;
        peak_known = peak_known && a.peak_known;
    }
    return {{"memory_snapshot",
             {{"reserved_bytes", reserved},
              {"allocated_bytes", allocated},
              {"active_bytes", active},
              {"segments", segments},
              {"trace_entries", entries},
              {"peak_allocated_bytes", or_null(peak, peak_known)},
              {"basis",
               "measured by PyTorch's caching allocator at dump time; peaks replayed from its trace (each "
               "device's own peak, summed over devices and ranks); categories inferred from frames"},
              {"ranks", out}}}};
}

std::string format_snapshot_report(const RankSnapshot& r) {
    const MemorySnapshot& s = *r.snapshot;
    std::string t =
        fmt::format("Memory snapshot {}{}\n", s.source, s.rank >= 0 ? fmt::format(" (rank {})", s.rank) : "");
    for (const std::string& w : s.warnings) t += "  warning: " + w + "\n";
    for (const DeviceMemory& m : r.analysis.devices) {
        t += fmt::format(
            "  cuda:{} at dump (measured): reserved {}, allocated {}, active {} in {} segments; largest "
            "free block {}\n",
            m.device, format_bytes(m.reserved_bytes), format_bytes(m.allocated_bytes), format_bytes(m.active_bytes),
            m.segments, format_bytes(m.largest_free_block_at_dump));
        for (const std::string& n : m.notes) t += "    note: " + n + "\n";
        if (!m.has_trace) continue;
        t += fmt::format(
            "    trace: {} entries; at its start (derived: dump minus the trace) allocated {}, reserved {}\n",
            m.trace_entries, m.start_known ? format_bytes(m.start_allocated) : "unknown",
            m.start_known ? format_bytes(m.start_reserved) : "unknown");
        t += fmt::format("    peak allocated {} after entry {}{}; reserved then {}; peak reserved {}\n",
                         format_bytes(m.peak_allocated), m.peak_entry,
                         m.peak_time_us >= 0 ? fmt::format(" (t = {} us)", m.peak_time_us) : "",
                         format_bytes(m.reserved_at_peak), format_bytes(m.peak_reserved));
        t += fmt::format("    fragmentation at the peak: {} reserved but not allocated, largest free block {}\n",
                         format_bytes(m.free_in_segments_at_peak),
                         m.largest_free_block_at_peak >= 0 ? format_bytes(m.largest_free_block_at_peak) : "unknown");
        for (const OomEvent& o : m.ooms)
            t += fmt::format("    OOM at entry {}: asked for {}, the device had {} free; allocated {}, reserved {}\n",
                             o.entry, format_bytes(o.requested),
                             o.device_free >= 0 ? format_bytes(o.device_free) : "unknown", format_bytes(o.allocated),
                             format_bytes(o.reserved));
        t += fmt::format(
            "    at the peak, {} allocations by the frame that made them (first frame outside torch, C++ "
            "and Python's runtime):\n",
            m.at_peak.size());
        for (size_t i = 0; i < std::min(top_n, m.sites.size()); ++i)
            t += fmt::format("      {:>11} {:>5}x  {}  [{}, {}]\n", format_bytes(m.sites[i].bytes), m.sites[i].count,
                             frame_label(s, m.sites[i].frame), category_name(m.sites[i].category),
                             category_basis(m.sites[i].category));
        t += "    at the peak, by category (inferred from the frames' names; the rest unknown):\n";
        for (const CategoryTotal& c : m.categories)
            t += fmt::format("      {:>11} {:>5}x  {} ({})\n", format_bytes(c.bytes), c.count,
                             category_name(c.category), category_basis(c.category));
        if (m.has_trace) {
            const CategoryBytes own = category_peaks(build_series(s, m));
            t += "    over the trace, each category's own peak (inferred from the frames' names; the rest unknown):\n";
            for (size_t k = 0; k < kSnapshotCategories; ++k)
                if (own[k] > 0)
                    t += fmt::format("      {:>11}  {}\n", format_bytes(own[k]), category_name(MemoryCategory(k)));
        }
        t += "    largest allocations at the peak:\n";
        for (size_t i = 0; i < std::min<size_t>(5, m.at_peak.size()); ++i)
            t += fmt::format("      {:>11}  {}  [{}; {}]\n", format_bytes(m.at_peak[i].size),
                             frame_label(s, m.at_peak[i].user_frame), category_name(m.at_peak[i].category),
                             origin_name(m.at_peak[i].origin));
    }
    return t;
}

}  // namespace us::app
