// HTA 0.5.0's definitions, read from its source (hta/analyzers/breakdown_analysis.py, communication_analysis.py,
// hta/common/trace.py, trace_parser.py, hta/utils/utils.py) and written anew here; docs/formulas.md cites them.
#include "profiler/analysis/hta_breakdown.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <map>
#include <set>

#include "profiler/analysis/intervals.h"
#include "profiler/trace/run_info.h"

namespace us::prof {

namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

// The double a JSON parser makes of the decimal microseconds that hold `ns`: long double (64-bit mantissa) divides
// exactly enough that the one rounding to double is the parser's (ns below ~1e19).
double us_as_double(int64_t ns) { return double(static_cast<long double>(ns) / 1000.0L); }
int64_t hta_ts(int64_t ns) { return int64_t(std::ceil(us_as_double(ns))) * 1000; }

// HTA's merge_kernel_intervals: in begin order, a kernel opens a new group when it begins after every earlier
// kernel's end; a group spans its members' earliest begin to latest end. (After the microsecond rounding a short
// kernel's end can precede its begin; HTA keeps such groups, with their negative length, and so do we.)
std::vector<Interval> hta_merge(std::vector<Interval> v) {
    std::stable_sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.first < b.first; });
    std::vector<Interval> groups;
    int64_t latest_end = INT64_MIN;
    for (const Interval& k : v) {
        if (groups.empty() || k.first > latest_end)
            groups.push_back(k);
        else
            groups.back().second = std::max(groups.back().second, k.second);
        latest_end = std::max(latest_end, k.second);
    }
    return groups;
}

int64_t summed_length(const std::vector<Interval>& groups) {
    int64_t n = 0;
    for (const auto& [b, e] : groups) n += e - b;
    return n;
}

std::vector<Interval> well_formed(const std::vector<Interval>& groups) {
    std::vector<Interval> out;
    for (const auto& g : groups)
        if (g.second > g.first) out.push_back(g);
    return out;
}

// Kineto's ProfilerStep#N is our step N + offset: the importer's run description says it; an engine trace exports
// its step N as ProfilerStep#N+1.
int kineto_step_offset(const RankTrace& rt) { return rt.imported() ? imported_run_info(rt).kineto_step_offset : 1; }

// The stream id a device span's sub-lane stands for (the reader's "streams" list), -1 when unknown.
int64_t stream_id(const RankTrace& rt, int slot) {
    const auto& ids = rt.info.stream_ids;
    return ids.is_array() && size_t(slot) < ids.size() && ids[size_t(slot)].is_number_integer()
               ? ids[size_t(slot)].get<int64_t>()
               : -1;
}

}  // namespace

std::pair<int64_t, int64_t> hta_rounded(int64_t begin_ns, int64_t end_ns) {
    const double ts = us_as_double(begin_ns), dur = us_as_double(end_ns - begin_ns);
    return {int64_t(std::ceil(ts)) * 1000, int64_t(std::floor(ts + dur)) * 1000};
}

HtaKernelType hta_kernel_type(std::string_view name, Lane lane) {
    if (lane == Lane::device_comm || (starts_with(name, "nccl") && contains(name.substr(4), "Kernel")))
        return HtaKernelType::communication;
    // HTA's memory pattern is "^Memcpy|^Memset|^dma"; our CUPTI names are lower case ("memcpy HtoD", "memset").
    if (starts_with(name, "Memcpy") || starts_with(name, "Memset") || starts_with(name, "dma") ||
        starts_with(name, "memcpy") || starts_with(name, "memset"))
        return HtaKernelType::memory;
    // Not computation: HTA's "(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)" matched at the start.
    if (contains(name, "Memcpy") || contains(name, "Sync")) return HtaKernelType::other;
    return HtaKernelType::computation;
}

namespace {

// Which kernels HTA's loader keeps and the step each falls in. Trace._filter_irrelevant_gpu_kernels keeps the
// kernels whose launching CPU event began before the last ProfilerStep did; with fewer than two ProfilerSteps it keeps
// them all. Without ProfilerStep the reader makes one step of the whole window: HTA sees no iteration there.
struct KernelWindow {
    std::vector<Span> steps;  // the rank's step spans, in time order
    bool window = false;      // the reader's one step of the whole window
    bool filter = false;      // two steps or more: kernels launched in the last are left out
    int last_step = 0;
    int64_t last_begin = INT64_MAX;
    bool round_to_us = false;
    std::vector<HtaKernel> kernels;
    std::set<int> listed;  // HTA's steps: those of the kept, correlated rows on a stream above 0 (add_iteration)

    KernelWindow(const RankTrace& rt, const HtaOptions& options) : round_to_us(options.round_to_us) {
        for (const Span& s : rt.lanes[size_t(Lane::host)].spans())
            if (s.kind == SpanKind::step) steps.push_back(s);
        std::sort(steps.begin(), steps.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
        // HTA reads steps from ProfilerStep only: without one it takes every kernel, however the steps were found
        window = rt.imported() && imported_run_info(rt).steps_from != "ProfilerStep";
        filter = steps.size() >= 2;
        if (filter) last_step = steps.back().step, last_begin = steps.back().begin;
    }
    int64_t round_ts(int64_t ns) const { return round_to_us ? hta_ts(ns) : ns; }
    // HTA compares its rounded times: a launch is kept when it began before the last step did.
    bool launched_in_window(int64_t launch) const { return !filter || round_ts(launch) < round_ts(last_begin); }
    // HTA's add_iteration: the ProfilerStep whose [ts, ts + dur) holds a time (our 1-based step, 0 for none).
    int step_at(int64_t t) const {
        for (auto it = steps.rbegin(); it != steps.rend(); ++it)
            if (it->begin <= t && t < it->end) return it->step;
        return 0;
    }
    HtaKernel& add(int64_t begin, int64_t end, int64_t launch, int stream, int step, HtaKernelType type) {
        HtaKernel k;
        std::tie(k.begin, k.end) = round_to_us ? hta_rounded(begin, end) : std::pair{begin, end};
        k.launch = launch == INT64_MIN ? launch : round_ts(launch);
        k.stream = stream, k.step = step, k.type = type;
        kernels.push_back(k);
        return kernels.back();
    }
};

// The device lanes' kernels HTA keeps, each with its launch: the runtime call of the same correlation id where the
// reader joined this file's kernels to their calls (Kineto's files carry the ids; Span::launch_lead), else the one
// launch_times() finds by the launching op's name.
void add_device_kernels(const TraceStore& store, int rank, const RankTrace& rt, KernelWindow& w, HtaBreakdown* info) {
    const LaunchTimes launches = launch_times(store, rank);
    if (info) info->launch_source = launches.source;
    bool joined = false;
    for (Lane lane : {Lane::device, Lane::device_comm})
        for (const Span& s : rt.lanes[size_t(lane)].spans()) joined |= rt.imported() && s.launch_lead != 0;
    for (Lane lane : {Lane::device, Lane::device_comm}) {
        const auto& spans = rt.lanes[size_t(lane)].spans();
        const auto& launch = lane == Lane::device ? launches.device : launches.device_comm;
        for (size_t i = 0; i < spans.size(); ++i) {
            const Span& s = spans[i];
            int64_t called = launch[i];
            bool kept = true;
            if (joined) {
                // HTA's loader merges kernels with CPU rows on correlation (an inner join): with two steps or more it
                // keeps none whose correlation has no call in the file (launched before the profiler started).
                called = s.launch_lead != 0 ? s.begin - int64_t(s.launch_lead - 1) : INT64_MIN;
                kept = !w.filter || (called != INT64_MIN && w.launched_in_window(called));
            } else if (w.filter) {
                // Our step of a device span is its launching op's (contract): the step test is HTA's launch test.
                kept = s.step != 0 ? s.step != w.last_step : s.begin < w.last_begin;
            }
            if (!kept) continue;
            w.add(s.begin, s.end, called, s.thread, s.step, hta_kernel_type(store.name(s.name), lane));
            if (called != INT64_MIN && stream_id(rt, s.thread) > 0 && s.step != 0) w.listed.insert(s.step);
        }
    }
}

// Rows carrying args.stream that are not kernels, memcpy or memset, which the reader kept aside (an imported rank's
// RankMetadata::hta_stream_rows): HTA's temporal breakdown counts every row whose stream is not -1. Their launch is the
// runtime call with the row's correlation id, the row's own begin without one (a CPU row to HTA's filter), unknown
// when the correlation has no call in the file.
void add_stream_rows(const RankTrace& rt, KernelWindow& w) {
    const int64_t clock = rt.clock_offset_ns;
    for (const HtaStreamRow& row : rt.info.hta_stream_rows) {
        const int64_t begin = row.begin - clock, end = row.end - clock;
        const int64_t called = row.launch ? *row.launch - clock : INT64_MIN;
        if (w.filter && (called == INT64_MIN || !w.launched_in_window(called))) continue;
        const int step = called == INT64_MIN ? 0 : w.step_at(called);
        w.add(begin, end, called, -1, step, hta_kernel_type(row.name, Lane::device)).in_idle_breakdown = false;
        if (row.correlated && row.stream > 0 && step != 0) w.listed.insert(step);
    }
}

// The steps HTA lists (Kineto's numbers) and the rule that chose the kernels, in words.
void describe_steps(const KernelWindow& w, bool imported, int offset, HtaBreakdown& info) {
    std::set<int> used;
    for (const Span& s : w.steps)
        if (!w.window && (!w.filter || s.step != w.last_step)) used.insert(s.step);
    if (imported) used = w.window ? std::set<int>{} : w.listed;
    info.kineto_steps.clear();
    for (int n : used) info.kineto_steps.push_back(n - offset);
    info.steps_rule = w.window   ? std::string("no ProfilerStep: every kernel, and no step listed, as HTA")
                      : w.filter ? fmt::format("kernels launched before ProfilerStep#{} (the last) began, as HTA keeps",
                                               w.last_step - offset)
                                 : std::string("fewer than two ProfilerSteps: every kernel, as HTA keeps");
    if (imported && !w.window && w.listed.empty() && !w.steps.empty())
        info.steps_rule += "; none listed: HTA gives a step only to kernels on a stream above 0";
}

}  // namespace

std::vector<HtaKernel> hta_kernels(const TraceStore& store, int rank, const HtaOptions& options, HtaBreakdown* info) {
    const RankTrace* rt = store.rank(rank);
    if (!rt) return {};
    KernelWindow w(*rt, options);
    add_device_kernels(store, rank, *rt, w, info);
    if (rt->imported()) add_stream_rows(*rt, w);
    if (info) describe_steps(w, rt->imported(), kineto_step_offset(*rt), *info);
    return std::move(w.kernels);
}

HtaFigures hta_figures(std::vector<HtaKernel> kernels, const HtaOptions& options) {
    HtaFigures f;
    f.kernels = int(kernels.size());
    if (kernels.empty()) return f;
    std::vector<Interval> all, comp, comm;
    for (const HtaKernel& k : kernels) {
        all.emplace_back(k.begin, k.end);
        if (k.type == HtaKernelType::computation) comp.emplace_back(k.begin, k.end);
        if (k.type == HtaKernelType::communication) comm.emplace_back(k.begin, k.end);
    }
    // Temporal breakdown (BreakdownAnalysis.get_temporal_breakdown, _get_idle_time_for_kernels).
    const auto merged = hta_merge(all);
    const int64_t kernel_time = merged.back().second - merged.front().first;
    const int64_t idle = kernel_time - summed_length(merged);
    const auto comp_merged = hta_merge(comp);
    const int64_t compute = summed_length(comp_merged);
    f.kernel_time_us = double(kernel_time) / 1e3;
    f.idle_time_us = double(idle) / 1e3;
    f.compute_time_us = double(compute) / 1e3;
    f.non_compute_time_us = double(kernel_time - compute - idle) / 1e3;
    // Overlap (CommunicationAnalysis.get_comm_comp_overlap): time with both a merged computation and a merged
    // communication interval running over the merged communication time, the whole kept trace at once.
    const auto comm_merged = hta_merge(comm);
    const int64_t comm_time = summed_length(comm_merged);
    if (comm_time > 0)
        f.comp_comm_overlap_pct =
            100.0 * double(intersection_length(well_formed(comp_merged), well_formed(comm_merged))) / double(comm_time);
    // Idle breakdown (BreakdownAnalysis._analyze_idle_time_for_stream): per stream, in begin order, the gap from
    // the previous kernel's end to this one's begin is host wait when this kernel was launched after the previous
    // one ended, else kernel wait when shorter than consecutive_kernel_delay, else other.
    std::erase_if(kernels, [](const HtaKernel& k) { return !k.in_idle_breakdown; });
    bool any_launch = false;
    for (const HtaKernel& k : kernels) any_launch |= k.launch != INT64_MIN;
    if (any_launch) {
        std::stable_sort(kernels.begin(), kernels.end(), [](const HtaKernel& a, const HtaKernel& b) {
            return a.stream != b.stream ? a.stream < b.stream : a.begin < b.begin;
        });
        int64_t host = 0, wait = 0, other = 0;
        for (size_t i = 1; i < kernels.size(); ++i) {
            const HtaKernel& prev = kernels[i - 1];
            const HtaKernel& k = kernels[i];
            if (prev.stream != k.stream) continue;
            const int64_t gap = k.begin - prev.end;
            if (k.launch != INT64_MIN && k.launch > prev.end)
                host += gap;
            else if (gap < options.consecutive_kernel_delay_ns)
                wait += gap;
            else
                other += gap;
        }
        f.host_wait_us = double(host) / 1e3, f.kernel_wait_us = double(wait) / 1e3, f.other_us = double(other) / 1e3;
    }
    return f;
}

std::optional<HtaBreakdown> hta_breakdown(const TraceStore& store, int rank, const HtaOptions& options) {
    const RankTrace* rt = store.rank(rank);
    if (!rt || !rt->has_device_spans()) return std::nullopt;
    HtaBreakdown b;
    b.rank = rank;
    std::vector<HtaKernel> kernels = hta_kernels(store, rank, options, &b);
    const int offset = kineto_step_offset(*rt);
    std::map<int, std::vector<HtaKernel>> by_step;
    for (const HtaKernel& k : kernels) by_step[k.step].push_back(k);
    for (int n : b.kineto_steps) b.per_step.push_back({n, hta_figures(std::move(by_step[n + offset]), options)});
    b.total = hta_figures(std::move(kernels), options);
    return b;
}

nlohmann::json hta_json(const HtaBreakdown& b) {
    auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
    const HtaFigures& f = b.total;
    return {{"steps", b.kineto_steps},
            {"kernel_time_us", f.kernel_time_us},
            {"idle_time_us", f.idle_time_us},
            {"compute_time_us", f.compute_time_us},
            {"non_compute_time_us", f.non_compute_time_us},
            {"comp_comm_overlap_pct", opt(f.comp_comm_overlap_pct)},
            {"idle_breakdown",
             {{"host_wait_us", opt(f.host_wait_us)},
              {"kernel_wait_us", opt(f.kernel_wait_us)},
              {"other_us", opt(f.other_us)}}}};
}

std::string format_hta(const std::vector<HtaBreakdown>& ranks) {
    if (ranks.empty()) return {};
    auto pct = [](double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; };
    auto opt_us = [](const std::optional<double>& v) { return v ? fmt::format("{:.0f}", *v) : std::string("unknown"); };
    std::string s = "\nGPU time as Holistic Trace Analysis 0.5.0 defines it (measured; docs/formulas.md, HTA)\n";
    s += fmt::format("  {:<6} {:>12} {:>8} {:>9} {:>12} {:>9}  {:>10} {:>11} {:>10}\n", "rank", "kernel us", "idle %",
                     "compute %", "non-compute %", "overlap %", "host wait", "kernel wait", "other us");
    for (const HtaBreakdown& b : ranks) {
        const HtaFigures& f = b.total;
        s += fmt::format("  {:<6} {:>12.0f} {:>8.2f} {:>9.2f} {:>12.2f} {:>9}  {:>10} {:>11} {:>10}\n", b.rank,
                         f.kernel_time_us, pct(f.idle_time_us, f.kernel_time_us),
                         pct(f.compute_time_us, f.kernel_time_us), pct(f.non_compute_time_us, f.kernel_time_us),
                         f.comp_comm_overlap_pct ? fmt::format("{:.2f}", *f.comp_comm_overlap_pct) : "unknown",
                         opt_us(f.host_wait_us), opt_us(f.kernel_wait_us), opt_us(f.other_us));
    }
    bool no_comm = false;
    for (const HtaBreakdown& b : ranks) no_comm |= !b.total.comp_comm_overlap_pct;
    if (no_comm)
        s += "  overlap unknown: no NCCL kernels on the GPU (no collective, or collectives staged through the host)\n";
    const HtaBreakdown& first = ranks.front();
    std::string steps;
    for (int n : first.kineto_steps) steps += (steps.empty() ? "" : ",") + std::to_string(n);
    s += fmt::format("  steps (ProfilerStep#): {} - {}\n", steps.empty() ? "none" : steps, first.steps_rule);
    s += fmt::format("  idle breakdown: gaps between kernels on each stream, summed over streams; launch times {}\n",
                     first.launch_source.empty() ? "unknown (host wait cannot be told)" : first.launch_source);
    return s;
}

}  // namespace us::prof
