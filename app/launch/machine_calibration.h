// Measuring this machine for the planner (`ultrascope calibrate`, docs/planner.md "Calibration"), as named steps a
// command or the GUI runs in turn: the collective benchmark between ranks (bench_collectives under mpirun), the link
// between emulated nodes (the benchmark across them, and runs of the engine across them for what its transfers see:
// docs/nodes.md), and short training runs whose traces give GEMM throughput by size and the per-op costs. Each launch
// is a child process that dies with this one (launcher.h) and is ended, with a message, when it stops making
// progress (progress_deadline.h); the fitting is the planner's (app/plan/calibration.h).
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/launch/emulated_nodes.h"
#include "app/launch/progress_deadline.h"
#include "app/plan/calibration.h"

namespace us::app {

struct CalibrationSettings {
    int ranks = 2;     // of the measured runs on this host, one thread each
    int steps = 6;     // of each measured run (the first is set-up, not used)
    int repeats = 10;  // per collective size
    int tries = 3;     // passes of each measurement: collectives keep the fastest, training runs the median
    std::string preset = "small";
    NodeLinks nodes{0};                           // count > 0: also the link between these emulated nodes
    std::function<void(const std::string&)> say;  // a line per launch (progress)
    // Each launch's progress deadline, sized from the launches before it (--progress-timeout S fixes it); shared, so
    // that the steps, which take the settings as const, record what they saw.
    std::shared_ptr<LaunchPace> pace = std::make_shared<LaunchPace>();
};

// What the steps measured: the machine file's cluster and how it was measured.
struct MachineCalibration {
    predict::ClusterDesc cluster;
    size_t collective_samples = 0, inter_node_samples = 0;
    std::vector<std::string> runs;  // the measured training runs' command lines
    // between the emulated nodes, bytes/s: the benchmark's fit, a tensor-parallel run's all-reduces, a data-parallel
    // run's gradient buckets (0: not measured)
    double benchmark_inter_bandwidth = 0, blocking_inter_bandwidth = 0, bucket_inter_bandwidth = 0;
    nlohmann::json to_json() const;  // the machine file, with its "measurements"
};

// Step 0: what this machine is before anything is measured (its cores as ranks, its memory shared over them).
predict::ClusterDesc describe_this_machine();
// Step 1: the link between ranks on this host (intra-node; inter-node too until step 2 measures it).
void measure_host_link(const CalibrationSettings& s, MachineCalibration& m);
// Step 2 (settings.nodes.count > 0): the link between emulated nodes, and the cluster becomes those nodes.
void measure_node_link(const CalibrationSettings& s, MachineCalibration& m);
// Step 3: per-op costs from short data-parallel runs of the engine at two micro-batch sizes.
void measure_op_costs(const CalibrationSettings& s, MachineCalibration& m);
// The steps in order, their temporary files in one folder removed at the end (and the folders of killed
// calibrations before the start). UserError when a launch fails, stalls or a stop signal arrives.
MachineCalibration calibrate_machine(const CalibrationSettings& s);

}  // namespace us::app
