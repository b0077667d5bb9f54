// The measurement launches of a calibration, step by step (machine_calibration.h).
#include "app/launch/machine_calibration.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "app/launch/launcher.h"
#include "app/launch/process_guard.h"
#include "app/launch/stale_runs.h"
#include "common/core/check.h"
#include "common/settings/config.h"
#include "profiler/trace/trace_store.h"

namespace us::app {

namespace fs = std::filesystem;

namespace {

int core_count() { return int(std::max(1u, std::thread::hardware_concurrency())); }

void say(const CalibrationSettings& s, const std::string& line) {
    if (s.say) s.say(line);
}

// Runs one launch to its end; returns its output. UserError when it fails, a stop signal arrives, or it shows no
// progress (a line of output: a measurement, a step) for the pace's deadline: then its whole tree is ended.
std::string run_child(const CalibrationSettings& s, const LaunchSpec& spec, const std::string& what) {
    Launcher launcher;
    launcher.start(spec);
    for (const std::string& note : launcher.take_notes()) say(s, note);
    ProgressDeadline deadline(what, s.pace->deadline_seconds());
    std::string output;
    std::optional<int> code;
    while (!(code = launcher.poll())) {
        if (std::string more = launcher.take_output(); !more.empty()) {
            deadline.progress(last_line_of(more));
            output += more;
        }
        if (stop_signal() != 0) {
            launcher.stop();
            fail_user("calibration stopped by a signal during {}", what);
        }
        if (deadline.expired()) {
            launcher.stop(3000);
            fail_user("{}", deadline.stalled_message(
                                "The machine may be short of memory or cores (`free -m`, `top`: another job, "
                                "swapping), or a node's daemon never started: run it again when it is quieter, or "
                                "give each measurement longer (--progress-timeout S)."));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    output += launcher.take_output();
    s.pace->saw(deadline);
    US_CHECK_INPUT(*code == 0, "calibration: {} failed (exit code {}):\n{}", what, *code,
                   output.size() > 2000 ? output.substr(output.size() - 2000) : output);
    return output;
}

// This calibration's temporary files (traces read back), one folder removed when it ends.
fs::path work_folder() { return fs::temp_directory_path() / fmt::format("ultrascope-calibrate-{}", ::getpid()); }

std::string beside_self(const std::string& name) {
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    return ec ? name : (self.parent_path() / name).string();
}

int64_t host_memory_bytes() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    int64_t kb = 0;
    while (in >> key >> kb)
        if (key == "MemTotal:") return kb * 1024;
    return 0;
}

// bench_collectives on `ranks` ranks, one thread each.
LaunchSpec collectives_launch(const CalibrationSettings& s) {
    const std::string bench = beside_self("bench_collectives");
    US_CHECK_INPUT(::access(bench.c_str(), X_OK) == 0,
                   "calibration needs {} (build it: ninja -C BUILD bench_collectives)", bench);
    LaunchSpec coll;
    coll.ranks = s.ranks;
    coll.train_binary = bench;
    coll.train_args = {std::to_string(s.repeats)};
    coll.threads_per_rank = 1;
    return coll;
}

// Each pass reports per size the median of --repeats; of the --tries passes, each size keeps its fastest: other work
// on a shared machine only ever slows a collective down.
std::vector<plan::CollectiveSample> fastest_of_passes(const CalibrationSettings& s, const LaunchSpec& launch,
                                                      const std::string& what, const std::string& pass_line) {
    std::vector<plan::CollectiveSample> all;
    for (int t = 0; t < s.tries; ++t) {
        say(s, fmt::format("{}, pass {} of {}", pass_line, t + 1, s.tries));
        for (const auto& sample : plan::parse_collective_samples(run_child(s, launch, what))) all.push_back(sample);
    }
    return plan::fastest_samples(all);
}

double median(std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[(v.size() - 1) / 2];
}

// Runs of the engine across the emulated nodes, one rank a node; each returns its trace, read back and removed.
class NodeRuns {
public:
    NodeRuns(const CalibrationSettings& s, const LaunchSpec& across) : m_s(s), m_launch(across) {
        m_launch.train_binary.clear();
    }
    std::unique_ptr<prof::TraceStore> trace_of(const std::vector<std::string>& args, const std::string& what,
                                               int steps) {
        const std::string trace = (work_folder() / fmt::format("nodes-{}.ustrace", m_serial++)).string();
        LaunchSpec one = m_launch;  // not --quiet: its step lines are its signs of progress
        one.train_args = {"--preset", m_s.preset, "--steps", std::to_string(steps), "--trace", trace};
        one.train_args.insert(one.train_args.end(), args.begin(), args.end());
        say(m_s, fmt::format("{} across the {} emulated nodes", what, m_s.nodes.count));
        run_child(m_s, one, what + " across nodes");
        auto store = std::make_unique<prof::TraceStore>();
        prof::load_trace(trace, *store);
        std::error_code gone;
        fs::remove(trace, gone);
        return store;
    }

private:
    const CalibrationSettings& m_s;
    LaunchSpec m_launch;
    int m_serial = 0;
};

// (a) Gradient buckets in flight together after the backward (--no-overlap): the planner prices dp's and ZeRO's
// buckets with what they saw. (b) The run overlapping in every other step: how much longer the compute beside the
// hidden buckets ran than the same ops in the steps between (the kernel's network work and the transport's copies
// share the cores). Each the median of --tries runs: a typical run of this machine.
void measure_buckets_and_slowdown(const CalibrationSettings& s, NodeRuns& runs, MachineCalibration& m) {
    const std::string dp = std::to_string(s.nodes.count);
    std::vector<double> slowdowns, buckets;
    for (int t = 0; t < s.tries; ++t) {
        const auto blocking =
            runs.trace_of({"--batch", "4", "--dp", dp, "--no-overlap"}, "a data-parallel run (--no-overlap)", s.steps);
        if (const double seen = plan::dp_all_reduce_bandwidth(*blocking); seen > 0) buckets.push_back(seen);
        // steps 2.. measured: at least 2 of each kind
        const auto alternating =
            runs.trace_of({"--batch", "4", "--dp", dp, "--overlap-alternate"},
                          "a data-parallel run overlapping every other step", std::max(s.steps, 5));
        if (const double slower = plan::overlap_slowdown(*alternating); slower >= 0) slowdowns.push_back(slower);
    }
    m.bucket_inter_bandwidth = m.cluster.inter_node_bucket_bandwidth = median(buckets);
    if (!slowdowns.empty()) m.cluster.inter_node_overlap_slowdown = median(slowdowns);  // else unmeasured: -1
}

// (c) Blocking collectives between compute, as tp's, ep's, cp's and pp's are: a tensor-parallel run's all-reduces
// give the inter-node link's bandwidth (the benchmark's fit keeps its latency).
void measure_blocking_collectives(const CalibrationSettings& s, NodeRuns& runs, MachineCalibration& m) {
    TrainConfig shape;
    apply_preset(shape, s.preset);
    if (shape.model.heads % s.nodes.count != 0) return;
    const auto tp = runs.trace_of({"--tp", std::to_string(s.nodes.count)}, "a tensor-parallel run", s.steps);
    if (const double seen = plan::tp_all_reduce_bandwidth(*tp); seen > 0)
        m.cluster.inter_node.bandwidth = m.blocking_inter_bandwidth = seen;
}

// The file then describes the emulated cluster: this machine's cores shared out over its nodes.
void describe_node_link(const CalibrationSettings& s, MachineCalibration& m) {
    predict::ClusterDesc& c = m.cluster;
    const NodeLinks& links = s.nodes;
    c.nodes = links.count;
    c.gpus_per_node = std::max(1, core_count() / links.count);
    c.description += fmt::format("; inter-node link measured between {} emulated nodes ({})", links.count,
                                 links.inter_node_gbps > 0 ? fmt::format("tbf {:g} Gbit/s", links.inter_node_gbps)
                                                           : std::string("unshaped veth"));
    c.description += fmt::format(": {:.3f} GB/s for back-to-back collectives (bench_collectives)",
                                 m.benchmark_inter_bandwidth / 1e9);
    if (m.blocking_inter_bandwidth > 0)
        c.description += fmt::format(", {:.3f} GB/s for a tensor-parallel run's all-reduces between its compute",
                                     m.blocking_inter_bandwidth / 1e9);
    if (m.bucket_inter_bandwidth > 0)
        c.description += fmt::format(", {:.3f} GB/s as a data-parallel run's gradient buckets saw it",
                                     m.bucket_inter_bandwidth / 1e9);
    if (c.inter_node_overlap_slowdown >= 0)
        c.description +=
            fmt::format("; compute beside hidden transfers {:.0f}% slower", 100 * c.inter_node_overlap_slowdown);
}

// The try whose best steady step's op time is the median of --tries runs of `run`: a typical run of this machine
// as it is (a prediction is checked against one run), not the luckiest nor the most disturbed.
std::unique_ptr<prof::TraceStore> median_run(const CalibrationSettings& s, const LaunchSpec& run, const fs::path& dir,
                                             int batch, const std::string& shown) {
    std::vector<std::pair<double, std::unique_ptr<prof::TraceStore>>> candidates;
    for (int t = 0; t < s.tries; ++t) {
        const std::string trace = (dir / fmt::format("b{}-{}.ustrace", batch, t)).string();
        LaunchSpec one = run;
        one.train_args.insert(one.train_args.end(), {"--trace", trace});
        say(s, fmt::format("ultrascope-train{} --trace {} (try {} of {})", shown, trace, t + 1, s.tries));
        run_child(s, one, "the measured training run");
        auto candidate = std::make_unique<prof::TraceStore>();
        prof::load_trace(trace, *candidate);
        const double op_s = plan::best_step_compute_s(*candidate);
        if (op_s > 0) candidates.emplace_back(op_s, std::move(candidate));
    }
    std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::unique_ptr<prof::TraceStore> store =
        candidates.empty() ? nullptr : std::move(candidates[(candidates.size() - 1) / 2].second);
    US_CHECK_INPUT(store != nullptr, "calibration: the measured runs recorded no steady step (run more --steps)");
    return store;
}

}  // namespace

nlohmann::json MachineCalibration::to_json() const {
    nlohmann::json j = predict::cluster_to_json(cluster);
    j["measurements"] = {
        {"collectives", collective_samples}, {"collectives_between_nodes", inter_node_samples}, {"runs", runs}};
    return j;
}

predict::ClusterDesc describe_this_machine() {
    const int cores = core_count();
    predict::ClusterDesc c;
    c.name = "this-machine";
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    c.description =
        fmt::format("{} ({} cores): one CPU rank per core, measured by `ultrascope calibrate`", host, cores);
    c.gpu_name = fmt::format("CPU core ({} thread per rank)", 1);
    c.gpus_per_node = cores;
    c.nodes = 1;
    c.memory_bytes = host_memory_bytes() / cores;
    c.memory_bandwidth = 10e9;  // only a fallback: every op cost below is measured
    c.default_precision = "fp32";
    return c;
}

void measure_host_link(const CalibrationSettings& s, MachineCalibration& m) {
    const LaunchSpec coll = collectives_launch(s);
    const auto samples = fastest_of_passes(
        s, coll, "bench_collectives", fmt::format("collectives between {} ranks ({})", s.ranks, coll.train_binary));
    m.collective_samples = samples.size();
    m.cluster.intra_node = plan::fit_link(samples);
    m.cluster.inter_node = m.cluster.intra_node;  // one host: every group stays on it
}

void measure_node_link(const CalibrationSettings& s, MachineCalibration& m) {
    const NodeLinks& links = s.nodes;
    if (links.count <= 0) return;
    const EmulatedNodes nodes(links, links.count);  // one rank a node: every hop crosses the emulated link
    for (const std::string& line : nodes.cleaned()) say(s, line);
    say(s, nodes.describe());
    LaunchSpec across = collectives_launch(s);
    across.ranks = links.count;
    across.hostfile = nodes.hostfile();
    across.mpirun_args = nodes.mpirun_args();
    across.hosts_share_cores = true;
    const auto fastest = fastest_of_passes(s, across, "bench_collectives across nodes",
                                           fmt::format("collectives between {} emulated nodes", links.count));
    // A shaped link is fitted on absolute errors: its burst lets small messages through at veth speed.
    m.cluster.inter_node =
        plan::fit_link(fastest, links.inter_node_gbps > 0 ? plan::FitErrors::absolute : plan::FitErrors::relative);
    m.inter_node_samples = fastest.size();
    m.benchmark_inter_bandwidth = m.cluster.inter_node.bandwidth;
    // What training's transfers see across the link, from runs of the engine across the nodes (docs/nodes.md): over
    // TCP they differ from the benchmark's back-to-back collectives and from each other.
    NodeRuns runs(s, across);
    measure_buckets_and_slowdown(s, runs, m);
    measure_blocking_collectives(s, runs, m);
    describe_node_link(s, m);
}

void measure_op_costs(const CalibrationSettings& s, MachineCalibration& m) {
    plan::OpCostFit fit;
    const fs::path dir = work_folder();
    // Two micro-batch sizes, so that the GEMM table spans the sizes of smaller and larger layouts.
    for (int batch : {8, 2}) {
        TrainConfig cfg;
        apply_preset(cfg, s.preset);
        cfg.batch = batch;
        cfg.parallel.dp = s.ranks;
        LaunchSpec run;
        run.ranks = s.ranks;
        run.threads_per_rank = 1;
        run.train_args = {"--preset", s.preset,
                          "--batch",  std::to_string(batch),
                          "--dp",     std::to_string(s.ranks),
                          "--steps",  std::to_string(s.steps)};  // not --quiet: its step lines show progress
        std::string shown;
        for (const auto& a : run.train_args) shown += " " + a;
        const auto store = median_run(s, run, dir, batch, shown);
        const GPTConfig& g = cfg.model;
        const predict::ModelDesc model =
            predict::engine_model(s.preset, g.vocab, g.hidden, g.layers, g.heads, g.seq, g.moe_experts, g.moe_topk,
                                  g.moe_every, cfg.moe_capacity_factor);
        fit.add_run(*store, model, predict::layout_from_config(cfg));
        m.runs.push_back("ultrascope-train" + shown);
    }
    fit.finish(m.cluster);
}

MachineCalibration calibrate_machine(const CalibrationSettings& s) {
    for (const std::string& line : remove_stale_temporary(fs::temp_directory_path(), "ultrascope-calibrate-"))
        say(s, line);
    fs::create_directories(work_folder());
    struct RemoveAtEnd {
        ~RemoveAtEnd() {
            std::error_code ec;
            fs::remove_all(work_folder(), ec);
        }
    } remove_at_end;
    MachineCalibration m;
    m.cluster = describe_this_machine();
    measure_host_link(s, m);
    measure_node_link(s, m);
    measure_op_costs(s, m);
    std::string runs;
    for (const auto& r : m.runs) runs += " " + r + ";";
    m.cluster.source = fmt::format("measured by `ultrascope calibrate` ({} collective sizes; training runs:{})",
                                   m.collective_samples, runs);
    return m;
}

}  // namespace us::app
