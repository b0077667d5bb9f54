// HTA 0.5.0's definitions, read from its source (hta/analyzers/breakdown_analysis.py, communication_analysis.py,
// hta/common/trace.py, trace_parser.py, hta/utils/utils.py) and written anew here; docs/formulas.md cites them.
#include "profiler/analysis/hta_breakdown.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "profiler/analysis/intervals.h"
#include "profiler/trace/run_info.h"

namespace us::prof {

namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int64_t round_up_us(int64_t ns) { return -floor_div(-ns, 1000) * 1000; }
int64_t round_down_us(int64_t ns) { return floor_div(ns, 1000) * 1000; }

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

}  // namespace

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

std::vector<HtaKernel> hta_kernels(const TraceStore& store, int rank, const HtaOptions& options, HtaBreakdown* info) {
    std::vector<HtaKernel> out;
    const RankTrace* rt = store.rank(rank);
    if (!rt) return out;
    const int offset = kineto_step_offset(*rt);
    std::vector<std::pair<int64_t, int>> steps;  // (begin, step)
    for (const Span& s : rt->lanes[size_t(Lane::host)].spans())
        if (s.kind == SpanKind::step) steps.emplace_back(s.begin, s.step);
    std::sort(steps.begin(), steps.end());
    // HTA's loader (Trace._filter_irrelevant_gpu_kernels) keeps the kernels whose launching CPU event began before
    // the last ProfilerStep did; with fewer than two ProfilerSteps it keeps them all.
    const bool filter = steps.size() >= 2;
    const int last_step = filter ? steps.back().second : 0;
    const int64_t last_begin = filter ? steps.back().first : INT64_MAX;
    std::set<int> used;
    for (const auto& [b, n] : steps)
        if (!filter || n != last_step) used.insert(n);
    if (info) {
        info->kineto_steps.clear();
        for (int n : used) info->kineto_steps.push_back(n - offset);
        info->steps_rule = filter
                               ? fmt::format("kernels launched before ProfilerStep#{} (the last) began, as HTA keeps",
                                             last_step - offset)
                               : std::string("fewer than two ProfilerSteps: every kernel, as HTA keeps");
    }
    const LaunchTimes launches = launch_times(store, rank);
    if (info) info->launch_source = launches.source;
    for (Lane lane : {Lane::device, Lane::device_comm}) {
        const auto& spans = rt->lanes[size_t(lane)].spans();
        const auto& launch = lane == Lane::device ? launches.device : launches.device_comm;
        for (size_t i = 0; i < spans.size(); ++i) {
            const Span& s = spans[i];
            // Our step of a device span is its launching op's (contract): the step test is HTA's launch test.
            const bool kept = !filter || (s.step != 0 ? s.step != last_step : s.begin < last_begin);
            if (!kept) continue;
            HtaKernel k;
            k.begin = options.round_to_us ? round_up_us(s.begin) : s.begin;
            k.end = options.round_to_us ? round_down_us(s.end) : s.end;
            k.launch = launch[i] == INT64_MIN || !options.round_to_us ? launch[i] : round_up_us(launch[i]);
            k.stream = s.thread;
            k.step = s.step;
            k.type = hta_kernel_type(store.name(s.name), lane);
            out.push_back(k);
        }
    }
    return out;
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
