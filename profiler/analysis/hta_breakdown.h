// Holistic Trace Analysis's three GPU analyses (temporal breakdown, computation-communication overlap, idle time
// breakdown), computed our way over a rank's device lanes with HTA 0.5.0's definitions, kernel classes, iteration
// filter and microsecond rounding, so that its figures and ours compare one to one (docs/formulas.md, "HTA").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "profiler/trace/launch_times.h"
#include "profiler/trace/trace_store.h"

namespace us::prof {

// HTA's kernel types (hta/utils/utils.py get_kernel_type), decided by the name: communication = "nccl...Kernel",
// memory = "Memcpy..." / "Memset..." / "dma...", computation = none of "nccl...Kernel", "...Memcpy", "Memset...",
// "...Sync"; other = the rest. Our own names differ in case ("memcpy HtoD", "memset") and our NCCL kernels sit on
// the device_comm lane, which say the same thing.
enum class HtaKernelType : uint8_t { computation, communication, memory, other };
HtaKernelType hta_kernel_type(std::string_view name, Lane lane);

// One device span as HTA sees it: times in ns rounded as HTA's parser rounds Kineto's float microseconds (begin
// up, end down to a whole microsecond), the launch's time (INT64_MIN: unknown) and the stream.
struct HtaKernel {
    int64_t begin = 0, end = 0, launch = INT64_MIN;
    int stream = 0;
    int step = 0;  // our 1-based step
    HtaKernelType type = HtaKernelType::computation;
    // False for the rows HTA's temporal breakdown counts but its idle breakdown does not (categories other than
    // kernel, memcpy, memset: a cuda_sync "Stream Sync", a cpu_op carrying args.stream).
    bool in_idle_breakdown = true;
};

// HTA's parser reads Kineto's microseconds as float64 and, in a file with fractional timestamps, keeps ceil(ts)
// and floor(ts + dur) of those doubles (trace_parser.py round_down_time_stamps). Near 1.7e15 us (epoch times) a
// double resolves only 0.25 us, so this is not the decimal text rounded: the [begin, end) in ns HTA ends up with.
std::pair<int64_t, int64_t> hta_rounded(int64_t begin_ns, int64_t end_ns);

struct HtaFigures {
    double kernel_time_us = 0;                    // from the first kernel's start to the last one's end
    double idle_time_us = 0;                      // kernel time minus the union of all kernels
    double compute_time_us = 0;                   // the union of computation kernels
    double non_compute_time_us = 0;               // kernel time - compute - idle
    std::optional<double> comp_comm_overlap_pct;  // |comp ∩ comm| / |comm| x 100; unknown without comm kernels
    // Idle time between consecutive kernels of each stream, summed over the streams; unknown when no kernel's
    // launch time is known (host wait cannot be told from the rest then).
    std::optional<double> host_wait_us, kernel_wait_us, other_us;
    int kernels = 0;
};

struct HtaStepFigures {
    int kineto_step = 0;  // ProfilerStep#N's N
    HtaFigures figures;
};

struct HtaBreakdown {
    int rank = 0;
    std::vector<int> kineto_steps;  // the ProfilerStep numbers whose kernels are counted
    std::string steps_rule;         // in words: which ones and why
    std::string launch_source;      // where launch times came from ("" when unknown)
    HtaFigures total;               // over every counted kernel at once, as HTA computes it
    std::vector<HtaStepFigures> per_step;
};

struct HtaOptions {
    // HTA's consecutive_kernel_delay (30) compares with its frame's times, which are Kineto's microseconds.
    int64_t consecutive_kernel_delay_ns = 30'000;
    bool round_to_us = true;  // as HTA's parser does (round_down_time_stamps)
};

// The rank's kernels HTA would keep: those launched before the last ProfilerStep began (HTA's loader drops the
// last iteration and what follows it), all of them when the trace has fewer than two steps. On an imported trace,
// as HTA's loader (Trace._filter_irrelevant_gpu_kernels) does with two steps or more, also without the device
// rows whose correlation id has no runtime call in the file (launched before the profiler started); plus the rows
// the reader kept aside because they carry args.stream (RankMetadata key "hta_stream_rows"), which HTA counts as
// GPU time whatever their category.
std::vector<HtaKernel> hta_kernels(const TraceStore& store, int rank, const HtaOptions& options, HtaBreakdown* info);

HtaFigures hta_figures(std::vector<HtaKernel> kernels, const HtaOptions& options = {});

// Empty optional for a rank without device spans.
std::optional<HtaBreakdown> hta_breakdown(const TraceStore& store, int rank, const HtaOptions& options = {});

// {"steps", "kernel_time_us", "idle_time_us", "compute_time_us", "non_compute_time_us", "comp_comm_overlap_pct",
//  "idle_breakdown": {"host_wait_us", "kernel_wait_us", "other_us"}} (docs/report-schema.md).
nlohmann::json hta_json(const HtaBreakdown& b);
std::string format_hta(const std::vector<HtaBreakdown>& ranks);

}  // namespace us::prof
