// The memory profiler's categories beside an imported run (memory_categories.h).
#include "profiler/import/memory_categories.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/core/format.h"
#include "profiler/import/kineto_memory_ops.h"
#include "profiler/trace/run_info.h"
#include "profiler/trace/kineto_counters.h"

namespace us::prof {

namespace {

// torch puts the tensors alive before profiling in a first row of their own, at the first event's time.
size_t first_event_row(const MemoryTimeline& t) { return t.size() > 1 && t.times_us[0] == t.times_us[1] ? 1 : 0; }

const std::vector<CounterPoint>* counter(const TraceStore& store, int rank, const char* name) {
    const uint32_t id = store.find_name(name);
    const RankTrace* rt = store.rank(rank);
    if (id == UINT32_MAX || !rt) return nullptr;
    const auto it = rt->counters.find(id);
    return it == rt->counters.end() || it->second.empty() ? nullptr : &it->second;
}

// The device whose first [memory] event falls at the timeline's first event (torch exports one device per file).
std::optional<int> device_of(const KinetoMemoryEvents& ev, const MemoryTimeline& t) {
    const int64_t first = t.times_us[first_event_row(t)];
    std::vector<int> seen;
    for (const auto& e : ev.events) {
        if (std::find(seen.begin(), seen.end(), e.device) != seen.end()) continue;
        seen.push_back(e.device);
        if (ev.profiler_time_us(e) == first) return e.device;
    }
    return std::nullopt;
}

}  // namespace

std::string device_label(std::optional<int> device) {
    if (!device) return "device unknown";
    return *device < 0 ? "host memory" : fmt::format("cuda:{}", *device);
}

std::vector<RankMemoryCategories> read_memory_categories(const std::vector<std::string>& paths, const RunInfo& run,
                                                         const std::vector<KinetoMemoryEvents>& events) {
    std::vector<RankMemoryCategories> out;
    if (!run.imported()) return out;
    const std::vector<std::string> files = find_memory_timelines(paths);
    const bool infer = !events.empty();
    for (const auto& f : files) {
        RankMemoryCategories r;
        r.measured = true;
        r.timeline = load_memory_timeline(f);
        r.peaks = timeline_peaks(r.timeline);
        r.rank = r.timeline.rank;
        if (r.rank < 0 && run.ranks.size() == 1) {
            r.rank = run.ranks[0];
            r.notes.push_back(fmt::format("{}: its name says no rank: taken as the run's only rank, {}", f, r.rank));
        } else if (r.rank < 0) {
            r.notes.push_back(
                fmt::format("{}: its name says no rank (rank0_..., rank_3_...): not placed on a rank", f));
        } else if (std::find(run.ranks.begin(), run.ranks.end(), r.rank) == run.ranks.end()) {
            r.notes.push_back(fmt::format("{}: rank {} is not in the run", f, r.rank));
        }
        const KinetoMemoryEvents* ev = nullptr;
        for (const auto& e : events)
            if (e.rank == r.rank && r.rank >= 0) ev = &e;
        if (ev) r.device = device_of(*ev, r.timeline);
        if (infer && !ev) {
            r.notes.push_back(
                fmt::format("{}: no trace of rank {} to compare the inferred categories with", f, r.rank));
        } else if (ev && !r.device) {
            r.notes.push_back(
                fmt::format("{}: no device of the trace's [memory] events starts at the timeline's first "
                            "event: inferred categories not compared",
                            f));
        } else if (ev) {
            r.grouped = compare_categories(*ev, r.timeline, *r.device, AgreementGrouping::grouped);
            r.strict = compare_categories(*ev, r.timeline, *r.device, AgreementGrouping::strict);
            r.inferred = inferred_timeline(*ev, *r.device);
        }
        out.push_back(std::move(r));
    }
    // The ranks without a timeline: their categories inferred only.
    for (const auto& ev : events) {
        if (ev.rank < 0 || std::any_of(out.begin(), out.end(), [&](auto& r) { return r.rank == ev.rank; })) continue;
        RankMemoryCategories r;
        r.rank = ev.rank, r.device = busiest_device(ev);
        if (!r.device) continue;  // no [memory] events: nothing to say
        r.inferred = inferred_timeline(ev, *r.device);
        out.push_back(std::move(r));
    }
    for (auto& r : out)
        if (r.inferred && r.inferred->size() > 0) r.inferred_peaks = timeline_peaks(*r.inferred);
    std::stable_sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.rank < b.rank; });
    return out;
}

void place_memory_categories(std::vector<RankMemoryCategories>& ranks, const TraceStore& store) {
    for (auto& r : ranks) {
        // On the trace's clock by the first [memory] event of its device (the store may shift a rank's times).
        const MemoryTimeline* t = r.measured ? &r.timeline : r.inferred ? &*r.inferred : nullptr;
        if (!t || t->size() == 0) continue;
        const char* name = r.device && *r.device >= 0 ? kKinetoAllocatedCounter : kKinetoCpuAllocatedCounter;
        const auto* points = r.rank >= 0 ? counter(store, r.rank, name) : nullptr;
        if (!points && !r.device && r.rank >= 0) points = counter(store, r.rank, kKinetoAllocatedCounter);
        if (points)
            r.offset_ns = points->front().t - t->times_us[r.measured ? first_event_row(*t) : 0] * 1000;
        else
            r.notes.push_back(
                fmt::format("{}: the rank's trace has no [memory] events to place the timeline on its "
                            "clock (record with profile_memory=True)",
                            t->source));
    }
}

std::vector<RankMemoryCategories> load_memory_categories(const std::vector<std::string>& paths, const TraceStore& store,
                                                         const RunInfo& run,
                                                         const std::vector<KinetoMemoryEvents>& memory) {
    auto ranks = read_memory_categories(paths, run, memory);
    place_memory_categories(ranks, store);
    return ranks;
}

bool has_memory_events(const TraceStore& store) {
    for (int r : store.ranks())
        for (const char* name : {kKinetoAllocatedCounter, kKinetoCpuAllocatedCounter})
            if (counter(store, r, name)) return true;
    return false;
}

namespace {

nlohmann::json peaks_json(const TimelinePeaks& p) {
    nlohmann::json cats = nlohmann::json::object();
    for (size_t c = 0; c < kProfilerCategories; ++c)
        cats[profiler_category_name(ProfilerCategory(c))] = {{"peak_bytes", p.peak_bytes[c]},
                                                             {"bytes_at_total_peak", p.at_total_peak[c]}};
    return cats;
}

std::string peaks_table(const TimelinePeaks& p) {
    std::string s = fmt::format("  {:<18} {:>12} {:>18}\n", "category", "peak", "at the total peak");
    for (size_t c = 0; c < kProfilerCategories; ++c)
        if (p.peak_bytes[c] != 0 || p.at_total_peak[c] != 0)
            s += fmt::format("  {:<18} {:>12} {:>18}\n", profiler_category_label(ProfilerCategory(c)),
                             format_bytes(p.peak_bytes[c]), format_bytes(p.at_total_peak[c]));
    return s;
}

}  // namespace

nlohmann::json memory_categories_json(const std::vector<RankMemoryCategories>& ranks) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& r : ranks) {
        const TimelinePeaks& p = r.measured ? r.peaks : r.inferred_peaks;
        const MemoryTimeline& t = r.measured ? r.timeline : *r.inferred;
        const auto at = t.size() ? r.store_time(p.total_peak_time_us) : std::nullopt;
        nlohmann::json j = {
            {"basis", r.measured ? "measured" : "inferred"},
            {"source", r.measured ? "memory profiler (prof.export_memory_timeline)"
                                  : "inferred from the CPU ops around each [memory] event (bytes allocated since "
                                    "profiling began; before it unknown)"},
            {"file", t.source},
            {"rank", r.rank >= 0 ? nlohmann::json(r.rank) : nlohmann::json(nullptr)},
            {"device", r.device ? nlohmann::json(device_label(r.device)) : nlohmann::json(nullptr)},
            {"samples", t.size()},
            {"total_peak_bytes", p.total_peak_bytes},
            {"total_peak_profiler_time_us", p.total_peak_time_us},
            {"total_peak_trace_time_ns", at ? nlohmann::json(*at) : nlohmann::json(nullptr)},
            {"categories", peaks_json(p)},
            {"notes", r.notes}};
        if (r.measured && r.inferred && r.inferred->size()) j["inferred_categories"] = peaks_json(r.inferred_peaks);
        if (r.grouped && r.strict)
            j["inferred_agreement"] = {
                {"basis", "derived: inferred (the ops around each [memory] event) against measured"},
                {"byte_time_grouped", r.grouped->byte_time},
                {"byte_time_strict", r.strict->byte_time},
                {"at_peak_grouped", r.grouped->at_peak},
                {"at_peak_strict", r.strict->at_peak},
                {"grouped_means", "gradient and autograd_detail count as one"}};
        else
            j["inferred_agreement"] = nullptr;
        list.push_back(std::move(j));
    }
    return {{"ranks", list}};
}

std::string format_memory_categories(const std::vector<RankMemoryCategories>& ranks) {
    std::string s;
    for (const auto& r : ranks) {
        const std::string rank = r.rank >= 0 ? std::to_string(r.rank) : "unknown";
        if (!r.measured) {
            const MemoryTimeline& t = *r.inferred;
            s += fmt::format(
                "\nMemory categories, rank {} ({}), INFERRED from the ops around each [memory] event (no "
                "memory profiler timeline beside the trace): bytes allocated since profiling began\n",
                rank, device_label(r.device));
            s += fmt::format("  total peak {} at {:.3f} ms into the profile\n",
                             format_bytes(r.inferred_peaks.total_peak_bytes),
                             double(r.inferred_peaks.total_peak_time_us - t.times_us.front()) / 1000.0);
            s += peaks_table(r.inferred_peaks);
        } else {
            s += fmt::format("\nMemory categories, rank {} ({}), measured by the memory profiler ({}):\n", rank,
                             device_label(r.device), r.timeline.source);
            s += fmt::format(
                "  total peak {} at {:.3f} ms into the timeline ({} samples)\n", format_bytes(r.peaks.total_peak_bytes),
                double(r.peaks.total_peak_time_us - r.timeline.times_us.front()) / 1000.0, r.timeline.size());
            s += peaks_table(r.peaks);
        }
        if (r.grouped && r.strict)
            s += fmt::format(
                "  inferred from the ops around each [memory] event, the categories agree with these on "
                "{:.1f}% of the byte-time ({:.1f}% counting gradient and autograd detail apart), {:.1f}% "
                "at the peak (derived)\n",
                100 * r.grouped->byte_time, 100 * r.strict->byte_time, 100 * r.grouped->at_peak);
        for (const auto& n : r.notes) s += "  note: " + n + "\n";
    }
    return s;
}

}  // namespace us::prof
