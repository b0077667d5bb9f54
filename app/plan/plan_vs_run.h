// The planner's prediction for a run that was measured, next to what its trace measured: the step time piece by
// piece, tokens/s and the busiest rank's memory by category (`ultrascope report`, its "planner" section;
// docs/report-schema.md). The model and layout come from the run's own config, the cluster from a machine file
// `ultrascope calibrate` wrote; without one only memory is compared (it needs no calibration).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "profiler/predict/cluster_desc.h"
#include "app/plan/planner.h"
#include "profiler/analysis/report.h"
#include "profiler/trace/trace_store.h"

namespace us::plan {

// Measured on one rank, per steady step (mean over the report's steady steps).
struct MeasuredPieces {
    int rank = -1;
    int steps = 0;
    double gemm_s = 0, attention_s = 0, other_ops_s = 0, optimizer_s = 0;  // op spans by class
    double compute_s = 0;                                                  // |C|: every op
    double comm_exposed_s = 0;                                             // |M \ C|
    double idle_s = 0;  // wall - |C u M| (a pipeline's bubble and its transfers land here)
    double wall_s = 0;
};

struct PlanVsRun {
    std::string cluster_source;   // the machine file used, empty without one
    std::string no_cluster_note;  // why time is not compared, and how to calibrate
    // The run's hosts as its ranks recorded them, which set the nodes the plan prices links on (not the machine
    // file's, which may describe another shape): e.g. "2 hosts, 2 ranks a host (block)"; empty when unrecorded.
    std::string hosts;
    predict::PlanResult plan;  // memory always; time only with a cluster
    bool has_time = false;
    double measured_best_step_s = 0;   // the least steady step (each as long as its slowest rank)
    double measured_mean_step_s = 0;   // the report's mean steady step
    double measured_tokens_per_s = 0;  // the report's (mean)
    MeasuredPieces measured;           // the rank of the busiest stage with the most op time
    int memory_rank = -1;              // the measured rank compared on memory (the planner's busiest stage)
    std::array<int64_t, kMemCategoryCount> measured_memory{};
    // Under expert parallelism: the engine's walk of that rank with the routing it measured (the planner assumes
    // uniform routing, having run nothing); -1 otherwise.
    int64_t at_measured_routing_bytes = -1;
};

// `cluster`: a calibrated (or any) cluster description, or nullopt. UserError when the trace's config cannot be
// planned (a model or layout the planner does not describe).
PlanVsRun compare_plan_with_run(const prof::TraceStore& store, const prof::Report& report,
                                const std::optional<predict::ClusterDesc>& cluster, const std::string& cluster_source);
nlohmann::json plan_vs_run_json(const PlanVsRun& c);
std::string format_plan_vs_run(const PlanVsRun& c);

}  // namespace us::plan
