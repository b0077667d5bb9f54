// Holistic Trace Analysis's three GPU analyses (temporal breakdown, computation-communication overlap, idle time
// breakdown), computed our way over a rank's device lanes with HTA 0.5.0's definitions, kernel classes, iteration
// filter and microsecond rounding, so that its figures and ours compare one to one (docs/formulas.md, "HTA").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
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
};

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
// last iteration and what follows it), all of them when the trace has fewer than two steps.
std::vector<HtaKernel> hta_kernels(const TraceStore& store, int rank, const HtaOptions& options, HtaBreakdown* info);

HtaFigures hta_figures(std::vector<HtaKernel> kernels, const HtaOptions& options = {});

// Empty optional for a rank without device spans.
std::optional<HtaBreakdown> hta_breakdown(const TraceStore& store, int rank, const HtaOptions& options = {});

// {"steps", "kernel_time_us", "idle_time_us", "compute_time_us", "non_compute_time_us", "comp_comm_overlap_pct",
//  "idle_breakdown": {"host_wait_us", "kernel_wait_us", "other_us"}} (docs/report-schema.md).
nlohmann::json hta_json(const HtaBreakdown& b);
std::string format_hta(const std::vector<HtaBreakdown>& ranks);

}  // namespace us::prof
