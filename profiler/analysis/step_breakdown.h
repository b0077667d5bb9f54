// Where each rank's time goes, step by step (docs/formulas.md, after Holistic Trace Analysis): the compute set C is
// the union of op spans, the communication set M the union of collective spans; overlapped = |C ∩ M|,
// exposed = |M \ C|, idle = wall - |C ∪ M|, overlap % = |C ∩ M| / |M|. Pipeline transfers (the p2p lane) are
// not in M: a posted receive spends nearly all its time waiting for the sending stage to compute, which is the
// bubble, so it shows as idle; the time transfers are outstanding is p2p_s.
// For pipeline stages the bubble is the time a stage spends with neither an op nor a collective between the first
// and the last op of the step, as a fraction of its op time (the ideal time), which is what (pp - 1) / m predicts;
// time spent in a tensor- or data-parallel collective is exposed communication, not bubble. "First and last" are
// the pipeline's (over all its stages: apply_pipeline_windows), so that a late-starting stage's wait for the
// warm-up counts, as in the theory; stage_bubble_fraction uses the stage's own first and last op. One collective
// is the pipeline's own: the tied embedding's gradient all-reduce between the first and the last stage, where a
// stage that finished its backward waits for the other stage's; that wait (found by matching the collective across
// the two ranks, collective_match.h) counts as bubble in the pipeline window (and in the stage's own window for
// stage_bubble_fraction, where it falls inside it), and stays exposed communication too.
// Per process group (dp, tp, pp ...): the time its collectives were outstanding, the part of it no compute
// covered (exposed: tensor-parallel collectives block the compute thread, so they are all exposed), and the bytes
// the rank sent for them (ring algorithms, from each collective's buffer size and the group's size).
// On a GPU traced by CUPTI the sets come from what the GPU executed (the device lanes): C is the union of kernels,
// memcpy and memset, M of NCCL kernels (send/recv ones are the pipeline's transfers: p2p_s); the engine's op spans
// there only mark launches. FLOPs always come from the engine's op spans (kernels carry none).
#pragma once

#include <array>
#include <map>
#include <vector>

#include "profiler/analysis/intervals.h"
#include "profiler/analysis/steady_step.h"
#include "profiler/trace/trace_store.h"

namespace us::prof {

struct StepBreakdown {
    int rank = 0;
    int step = 0;
    int64_t begin = 0, end = 0;  // the step's window, ns
    double wall_s = 0;
    double compute_s = 0;               // |C|
    double comm_s = 0;                  // |M|
    double p2p_s = 0;                   // time with a pipeline transfer outstanding (not in M)
    double overlapped_s = 0;            // |C ∩ M|
    double exposed_s = 0;               // |M \ C|
    double idle_s = 0;                  // wall - |C ∪ M|
    double overlap_pct = 0;             // 100 |C ∩ M| / |M|; 0 without communication
    double bubble_s = 0;                // idle between the first and the last op of the step
    double bubble_waiting_s = 0;        // of it, waiting inside the embedding all-reduce (exposed_s holds it too)
    double bubble_fraction = 0;         // bubble_s / compute_s
    double stage_bubble_fraction = 0;   // the same within the stage's own first and last op
    int64_t flops = 0;                  // sum of the engine's op spans' FLOPs
    bool device_truth = false;          // C and M came from the device lanes (a GPU traced by CUPTI)
    int64_t first_op = 0, last_op = 0;  // ns
    std::vector<Interval> busy_set;     // C ∪ M, for the pipeline windows
    std::vector<Interval> compute_set;  // C
    int micro_batches_in_flight = 0;    // most forwards whose backward (or W) had not finished
    double attention_s = 0;       // time in attention ops (RoPE aside): what context parallelism's balance is about
    int64_t attention_flops = 0;  // the FLOPs those attention ops carry: the work, whatever the machine's noise
    double experts_s = 0;     // time in the experts' GEMMs (spans named "expert ..."): what routing balance is about
    double core_wait_s = -1;  // the trainer's thread waiting for a core (core_wait.h); -1 unknown
    double worker_core_wait_s = -1;  // the rank's OpenMP workers' waits for a core, summed (core_wait.h); -1 unknown
    double core_cpu_s = -1, worker_cpu_s = -1;  // their time on a core: the trainer's, the others' summed; -1 unknown
    // By process group (GroupKind order): |M_g|, |M_g \ C|, and bytes sent by the collectives that began in the step.
    std::array<double, kGroupCount> group_comm_s{}, group_exposed_s{}, group_bytes{};
};

// Re-measures bubble_s / bubble_fraction of pipeline stages over the pipeline's window: per data-parallel replica
// and step, from the earliest first op to the latest last op of its stages. steps[r] are rank r's steps;
// replica_of[r] its coordinates; pipeline_waits (by rank id, merged) the time each rank spent waiting inside the
// embedding group's all-reduce, which counts as idle there.
void apply_pipeline_windows(std::vector<std::vector<StepBreakdown>>& steps, const std::vector<int>& replica_of,
                            int chunks, const std::map<int, std::vector<Interval>>& pipeline_waits = {});

// One entry per step the rank recorded (by its step spans), in step order.
std::vector<StepBreakdown> analyze_steps(const TraceStore& store, int rank);

// Sums over the given steps; percentages and fractions recomputed from the sums.
StepBreakdown sum_steps(const std::vector<StepBreakdown>& steps);

// The steps that describe the steady state (steady_step.h).
std::vector<StepBreakdown> steady_steps(const std::vector<StepBreakdown>& steps);
// How many steps steady_steps keeps, without copying them (views ask every frame).
inline size_t steady_step_count(const std::vector<StepBreakdown>& steps) {
    return steps.empty() ? 0 : steps.size() - first_steady_index(steps.front().step, steps.size());
}

}  // namespace us::prof
