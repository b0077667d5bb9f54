// Turning measurements of this machine into a cluster description (docs/planner.md, "Calibration"): collective
// timings fitted to the alpha-beta model, and a measured training run's op spans divided by the same work inventory
// the step-time model prices (model_shapes.h), so that calibration and prediction count identical units. Pure
// functions over data; `ultrascope calibrate` (app/launch/machine_calibration.h) runs the measurements.
#pragma once

#include <string>
#include <vector>

#include "profiler/predict/cluster_desc.h"
#include "profiler/predict/layout.h"
#include "profiler/predict/model_desc.h"

namespace us::prof {
class TraceStore;
}

namespace us::plan {

// One timed collective (bench_collectives prints these as JSON lines).
struct CollectiveSample {
    std::string op;  // all_reduce | all_gather | reduce_scatter
    int ranks = 2;
    double bytes = 0;    // the whole buffer
    double seconds = 0;  // median
};
std::vector<CollectiveSample> parse_collective_samples(const std::string& json_lines);
// Least squares of seconds = latency x hops(op, n) + bytes sent / bandwidth over every sample (the model of
// step_time.h). UserError when fewer than two sizes were measured. Relative errors by default, so that small
// messages (latency) count as much as large ones; absolute errors for a shaped link (tc tbf), whose burst passes a
// small message at the host's speed and only the large ones see its rate, which the gradients' buckets see.
enum class FitErrors { relative, absolute };
predict::Link fit_link(const std::vector<CollectiveSample>& samples, FitErrors errors = FitErrors::relative);

// Calibration's noise guard: the op time of a run's best steady step, summed over its ranks. `ultrascope calibrate`
// repeats each measured run and fits only the median run by this figure (a typical run, as the ones checked).
double best_step_compute_s(const prof::TraceStore& store);
// The bandwidth a data-parallel run's gradient all-reduce saw, in the units of fit_link (bytes a rank sends in the
// ring / second): per steady step, the ring's bytes over the window from the last rank's first bucket to the last
// bucket's end, the best step. Meant for a --no-overlap run, whose buckets are in flight together after the backward
// with no compute under them; 0 when the run has no data-parallel all-reduce of at least 4 KiB.
double dp_all_reduce_bandwidth(const prof::TraceStore& store);
// The bandwidth a run's blocking tensor-parallel all-reduces saw, in the units of fit_link: for the k-th all-reduce
// of at least 64 KiB of every rank's steady steps, the ring's bytes over the shortest of the ranks' spans of it (the
// rank that arrived last waited least), the median over them. Such collectives alternate with compute, as tp's,
// ep's, cp's and pp's transfers do in training; 0 when the run has none.
double tp_all_reduce_bandwidth(const prof::TraceStore& store);
// How much longer compute ran beside hidden communication, from a data-parallel run that overlapped its buckets in
// every other step (--overlap-alternate): in the overlapped steps, the ops with FLOPs (GEMMs, attention) that ran
// with a collective outstanding for at least 90% of their time, against the same ops' rate (by name) in the steps
// without overlap, that rate first scaled by the machine's drift between the two kinds of step (the overlapped steps'
// ops with nothing under them against the same ops in the other steps): the extra time over their time, clamped to
// [0, 0.95]; -1 (not measured) when nothing ran under a collective or nothing ran without one. The step-time model
// charges it per second of communication hidden on the inter-node link (ClusterDesc::inter_node_overlap_slowdown).
double overlap_slowdown(const prof::TraceStore& alternating);
// Per (op, ranks, size), the fastest of several benchmark passes' medians.
std::vector<CollectiveSample> fastest_samples(const std::vector<CollectiveSample>& samples);

// The per-op costs of a measured run: GEMM efficiency by size (op spans binned by FLOPs, relative to the best bin,
// whose throughput becomes the peak), attention efficiency, seconds per element of the memory-bound ops, seconds
// per parameter of the optimizer, and the host overhead (idle time between ops over op time), all from the one
// steady step of each rank with the least op time (a shared machine stretches some steps). The run's model and
// layout say how many elements each op class touched. Several runs may be accumulated before finish().
class OpCostFit {
public:
    void add_run(const prof::TraceStore& store, const predict::ModelDesc& model, const predict::Layout& layout);
    // Writes the fitted costs into `c` (peak_flops_fp32 and _bf16, op costs, host_overhead).
    void finish(predict::ClusterDesc& c) const;
    int runs() const { return m_runs; }

private:
    struct Bin {
        double flops = 0, seconds = 0;
        int spans = 0;
    };
    std::vector<std::pair<int, Bin>> m_gemm_bins;  // by round(2 log2 FLOPs)
    double m_attention_flops = 0, m_attention_s = 0;
    double m_norm_elements = 0, m_norm_s = 0, m_elementwise_elements = 0, m_elementwise_s = 0;
    double m_embedding_elements = 0, m_embedding_s = 0, m_loss_elements = 0, m_loss_s = 0;
    double m_optimizer_params = 0, m_optimizer_s = 0;
    double m_idle_s = 0, m_compute_s = 0;  // summed idle/compute ratios and their count
    int m_runs = 0;
};

}  // namespace us::plan
