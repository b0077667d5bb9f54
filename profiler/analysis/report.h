// The report: what `ultrascope report` prints and the GUI's tables show. Everything measured in the trace sits
// next to what docs/formulas.md predicts for the run's configuration; docs/report-schema.md documents the JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "profiler/analysis/expert_routing.h"
#include "profiler/analysis/hta_breakdown.h"
#include "profiler/analysis/cross_rank.h"
#include "profiler/analysis/imported_run.h"
#include "profiler/analysis/memory_analysis.h"
#include "profiler/analysis/misses.h"
#include "profiler/analysis/op_table.h"
#include "profiler/predict/predict.h"
#include "profiler/analysis/step_breakdown.h"
#include "profiler/trace/trace_store.h"

namespace us::prof {

struct RankReport {
    int rank = 0;
    GridCoords coords;   // unknown on an imported rank
    std::string label;   // "rank 1 (dp 1, pp 0)"
    std::string host;    // the node it ran on, as its trace says ("" unknown, and on a planner's prediction)
    std::string status;  // "ok", "running", "lost: ...", "ended with an error"
    std::vector<StepBreakdown> steps;
    StepBreakdown steady;  // summed over the steady steps
    OpTable ops;           // the steady steps' compute, op by op (op_table.h)
    MemoryPeaks memory;
    // The measured peaks of the categories its prediction models, summed: like for like with
    // predicted.memory_total() (modelled_sum_of_peaks).
    int64_t memory_modelled_sum_peak = 0;
    ProcessMemoryPeaks process;  // what the process held beyond the tracked categories
    predict::Prediction predicted;
    // Under expert parallelism, per model layer: the rows this rank's experts received over the uniform share, at
    // the step whose rows were most (measured routing; the prediction's walk takes it). Empty otherwise.
    std::vector<double> expert_load;
    std::vector<double> expert_load_most;  // each layer at its own most loaded step
    double peak_gflops = 0;                // the rank's device peak
    std::string peak_source;               // where it came from (measured sgemm, datasheet, estimate)
    uint64_t dropped_events = 0;
    // This rank's clock minus rank 0's, as last estimated (measured: MPI ping-pong; 0 on one host, which shares
    // CLOCK_MONOTONIC), and the estimate's uncertainty (half the shortest round trip). Timestamps are aligned by it.
    int64_t clock_offset_ns = 0, clock_uncertainty_ns = 0;
    // Device memory reserved through cudaMalloc (the caching allocator, cuBLAS, NCCL), from CUPTI: its peak, or -1
    // when the trace has no device_reserved_bytes counter (a CPU run, or a GPU run without CUPTI).
    int64_t device_reserved_peak = -1;
    // The time its trainer thread was ready but waited for a core, summed over the steady steps (core_wait.h;
    // measured by the kernel's run-queue accounting); -1 unknown (an imported run, an older trace).
    double runqueue_wait_s = -1;
    // Its OpenMP workers' waits, summed over them and the steady steps (thread-seconds); -1 unknown.
    double worker_runqueue_wait_s = -1;
    // The time on a core over the steady steps, of its trainer thread and of its OpenMP workers summed; -1 unknown.
    double thread_cpu_s = -1, worker_cpu_s = -1;
    // The CUPTI collector's own account (measured, from the rank's metadata): kernels, attributed to an op or not,
    // dropped records, its overhead. Null on a CPU rank or a build without the collector.
    nlohmann::json cupti;
    // Per group: how many hosts (nodes) its ranks are on, from the ranks' recorded host names (0: unknown). A group
    // on more than one host crosses the inter-node link (docs/nodes.md).
    std::array<int, kGroupCount> group_hosts{};
    // Per collective group (not pp, whose sends go to a stage's neighbours): whether this rank's successor in the
    // group's ring (the next rank of the group, wrapping round) is on another host: 1 across the inter-node link,
    // 0 inside the node, -1 unknown (hosts unrecorded, a group of one). A ring all-reduce sends every byte a rank
    // sends to that successor: the formula's split of the group's bytes into inter- and intra-node.
    std::array<int8_t, kGroupCount> ring_successor_across = [] {
        std::array<int8_t, kGroupCount> a{};
        a.fill(-1);
        return a;
    }();
    std::optional<HtaBreakdown> hta;  // HTA's figures (hta_breakdown.h), for a rank with device spans
};

struct Throughput {
    int steps_measured = 0;  // steady steps used
    double step_s =
        0;  // measured: each steady step's slowest rank's wall, averaged over the steps (the diff: ranks' mean)
    double tokens_per_s = 0;                // measured: the steady steps' tokens over their wall time
    double model_flops_per_token = 0;       // formula: 6N + 12*L*h*s (N active for a mixture of experts)
    double achieved_flops_per_s = 0;        // derived: tokens_per_s * model_flops_per_token
    double peak_flops_per_s = 0;            // sum of the ranks' peaks (measured on a CPU, datasheet on a GPU)
    std::vector<std::string> peak_sources;  // where the peaks came from, one entry per distinct source
    double mfu = 0;                         // derived: achieved / peak
};

// The pipeline's bubble as the theory means it: idle time of the pipeline relative to the ideal time, i.e. the
// bubble of its busiest stage (a less loaded stage also waits for the busiest one).
struct PipelineBubble {
    double measured = 0, theory = 0, simulated = 0;
    int busiest_rank = -1;
};

// Context parallelism's balance: attention time per rank over the steady steps, the largest over the smallest in
// a cp group (the worst group): about 1 for zigzag, about 2 cp - 1 for contiguous (its last rank sees every key).
struct ContextBalance {
    double attention_max_over_min = 0;
    double attention_flops_max_over_min = 0;  // the same for the attention FLOPs: the work itself, free of noise
    int slowest_rank = -1, fastest_rank = -1;
};

// Expert parallelism's balance: time in the experts' GEMMs per rank over the steady steps, the largest over the
// smallest among the ranks holding different experts (an uneven router makes one rank's experts the slowest, and
// the others wait for it in the next all-to-all).
struct ExpertBalance {
    double experts_max_over_min = 0;
    int slowest_rank = -1, fastest_rank = -1;
};

struct Report {
    int world_size = 0;
    PipelineBubble pipeline;
    ContextBalance context;
    ExpertRouting routing;  // empty for a dense model
    ExpertBalance expert_balance;
    nlohmann::json config;
    std::vector<RankReport> ranks;
    Throughput throughput;
    predict::PredictInput predict_input;
    std::vector<std::string> warnings;
    std::vector<Miss> misses;  // measured against predicted and formula, beyond 10% (misses.h)
    // A planner's prediction written as a trace (its ranks' metadata "predicted": model, cluster, layout); null for
    // a run. Every figure of such a report is the model's, and says so.
    nlohmann::json predicted;
    // Imported from PyTorch's profiler (metadata source "kineto"): no model or batch, so no tokens, FLOPs, MFU or
    // predictions (unknown, not zero); the memory is the [memory] counters' (imported_report.h).
    bool imported = false;
    ImportedRun imported_section;  // a run imported from PyTorch: its own section (imported_run.h); null JSON otherwise
    // From the ranks' digests: each rank's waits in its groups' collectives, the pipelines, who holds the run back
    // (cross_rank.h); what the Ranks view reads.
    CrossRank cross;
    bool is_predicted() const { return !predicted.is_null(); }
    const char* source() const { return is_predicted() ? "predicted: the planner's model" : "measured"; }
};

// What throughput and MFU divide by, one definition for the report and the training curves: a step's global tokens,
// model FLOPs per token (formula) and the peak FLOP/s of the ranks summed. A planner's prediction carries its own
// tokens and FLOPs (its model may not be the engine's), and its ranks stand for all the plan's GPUs.
struct ThroughputBasis {
    double tokens_per_step = 0, flops_per_token = 0, peak_flops_per_s = 0;
};
ThroughputBasis throughput_basis(const TraceStore& store);

// microbatches: an imported pipelined run's micro-batch count, as `ultrascope report --microbatches` gives it.
// (report_build.cpp; the text in report_text.cpp, the JSON in report_json.cpp)
Report build_report(const TraceStore& store, int microbatches = 0);
std::string format_report(const Report& report);
nlohmann::json report_json(const Report& report);

// The groups a rank's communication is reported for: the grid's dp, pp and tp always, others when they moved or
// were predicted to move bytes.
std::vector<GroupKind> reported_groups(const RankReport& r);
// A total over the rank's steady steps, per steady step (0 without any).
double per_steady_step(const RankReport& r, double total);
// Formula (the ring model of ring_successor_across): the bytes every rank sent across the inter-node link over all
// its steps, summed over the ranks; 0 when no group's ring crosses hosts.
double inter_node_bytes_formula(const Report& report);
// The largest over the ranks of the measured peaks of the `modelled` categories, summed (modelled_sum_of_peaks):
// what a prediction's busiest rank is compared with (the planner's).
int64_t most_modelled_sum_of_peaks(const Report& report, const CategoryMask& modelled);

}  // namespace us::prof
