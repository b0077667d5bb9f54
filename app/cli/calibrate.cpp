// `ultrascope calibrate [--out FILE]`: measures this machine for `ultrascope plan --cluster FILE` (docs/planner.md,
// "Calibration"). It launches child processes and reads what they measured, so `ultrascope` itself links neither MPI
// nor BLAS: the collective benchmark (bench_collectives, under mpirun) for the link's latency and bandwidth, and short
// training runs of ultrascope-train (one thread per rank, as many ranks as cores, at most 2 by default) whose traces
// give GEMM throughput by size and the per-op costs. With --nodes N, the link between N emulated nodes too: the
// benchmark across them, and runs of the engine across them for what its transfers see there (docs/nodes.md).
// Children die with this process (app/launch/launcher.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>
#include <unistd.h>

#include "app/cli/commands.h"
#include "app/launch/emulated_nodes.h"
#include "app/launch/launcher.h"
#include "app/launch/rootless_nodes.h"
#include "app/launch/process_guard.h"
#include "app/plan/calibration.h"
#include "profiler/predict/model_desc.h"
#include "common/core/check.h"
#include "common/settings/config.h"
#include "profiler/trace/trace_store.h"

namespace us::app {

namespace fs = std::filesystem;

namespace {

// Runs one launch to its end; returns its output. UserError when it fails or a stop signal arrives.
std::string run_child(const LaunchSpec& spec, const std::string& what) {
    Launcher launcher;
    launcher.start(spec);
    std::string output;
    std::optional<int> code;
    while (!(code = launcher.poll())) {
        output += launcher.take_output();
        if (stop_signal() != 0) {
            launcher.stop();
            fail_user("calibration stopped by a signal during {}", what);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    output += launcher.take_output();
    US_CHECK_INPUT(*code == 0, "calibration: {} failed (exit code {}):\n{}", what, *code,
                   output.size() > 2000 ? output.substr(output.size() - 2000) : output);
    return output;
}

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

}  // namespace

int calibrate_command(int argc, char** argv) {
    CLI::App cli{
        "ultrascope calibrate: measure this machine's GEMMs, MPI links and per-op costs for `ultrascope plan`"};
    std::string out = "machine.json", preset = "small";
    const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    int ranks = std::min(2, cores), steps = 6, repeats = 10, tries = 3;
    cli.add_option("--out", out, "Machine file to write (default machine.json)");
    cli.add_option("--ranks", ranks, "Ranks of the measured runs, one thread each (default: min(2, cores))");
    cli.add_option("--steps", steps, "Steps of each measured run (the first is not used)");
    cli.add_option("--preset", preset, "Engine preset of the measured runs (default small)");
    cli.add_option("--repeats", repeats, "Repetitions per collective size");
    cli.add_option("--tries", tries,
                   "Passes of each measurement: collectives keep the fastest, training runs the median (default 3)");
    NodeLinks links;
    links.nodes = 0;
    cli.add_option("--nodes", links.nodes,
                   "Also measure the link between N nodes emulated on this machine (root; docs/nodes.md): the "
                   "machine file's inter-node link");
    cli.add_option("--inter-node-gbps", links.inter_node_gbps, "With --nodes: the emulated link's rate, Gbit/s");
    CLI11_PARSE(cli, argc, argv);
    US_CHECK_INPUT(links.nodes == 0 || links.nodes >= 2, "--nodes must be at least 2 (the link between nodes)");
    US_CHECK_INPUT(links.nodes > 0 || links.inter_node_gbps == 0, "--inter-node-gbps goes with --nodes N");
    US_CHECK_INPUT(ranks >= 2, "--ranks must be at least 2 (the links are measured between ranks)");
    US_CHECK_INPUT(steps >= 3, "--steps must be at least 3 (step 1 is set-up, not used)");
    US_CHECK_INPUT(repeats >= 3, "--repeats must be at least 3");
    US_CHECK_INPUT(tries >= 1 && tries <= 20, "--tries must be between 1 and 20");
    {
        std::ofstream probe(out, std::ios::app);
        US_CHECK_INPUT(probe.good(), "--out '{}': cannot write there", out);
    }
    if (links.nodes > 0 && ::geteuid() != 0) enter_rootless_namespace();  // while this process has one thread
    install_stop_signals();

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

    // 1. The link between ranks: bench_collectives under mpirun.
    const std::string bench = beside_self("bench_collectives");
    US_CHECK_INPUT(::access(bench.c_str(), X_OK) == 0,
                   "calibration needs {} (build it: ninja -C BUILD bench_collectives)", bench);
    LaunchSpec coll;
    coll.ranks = ranks;
    coll.train_binary = bench;
    coll.train_args = {std::to_string(repeats)};
    coll.threads_per_rank = 1;
    // Each pass reports per size the median of --repeats; of the --tries passes, each size keeps its fastest: other
    // work on a shared machine only ever slows a collective down.
    std::vector<plan::CollectiveSample> all;
    for (int t = 0; t < tries; ++t) {
        std::fprintf(stderr, "calibrate: collectives between %d ranks (%s), pass %d of %d\n", ranks, bench.c_str(),
                     t + 1, tries);
        for (const auto& s : plan::parse_collective_samples(run_child(coll, "bench_collectives"))) all.push_back(s);
    }
    const auto samples = plan::fastest_samples(all);
    c.intra_node = plan::fit_link(samples);
    c.inter_node = c.intra_node;  // one host: every group stays on it
    size_t inter_samples = 0;
    // between the nodes, bytes/s: the benchmark's fit, gradient buckets in a run, a run's blocking all-reduces
    double benchmark_inter_bandwidth = 0, bucket_inter_bandwidth = 0, blocking_inter_bandwidth = 0;
    if (links.nodes > 0) {  // one rank a node: every hop crosses the emulated link
        const EmulatedNodes nodes(links, links.nodes);
        std::fprintf(stderr, "calibrate: %s\n", nodes.describe().c_str());
        LaunchSpec across = coll;
        across.ranks = links.nodes;
        across.hostfile = nodes.hostfile();
        across.mpirun_args = nodes.mpirun_args();
        across.hosts_share_cores = true;
        std::vector<plan::CollectiveSample> between;
        for (int t = 0; t < tries; ++t) {
            std::fprintf(stderr, "calibrate: collectives between %d emulated nodes, pass %d of %d\n", links.nodes,
                         t + 1, tries);
            for (const auto& s : plan::parse_collective_samples(run_child(across, "bench_collectives across nodes")))
                between.push_back(s);
        }
        const auto fastest = plan::fastest_samples(between);
        // A shaped link is fitted on absolute errors: its burst lets small messages through at veth speed.
        c.inter_node =
            plan::fit_link(fastest, links.inter_node_gbps > 0 ? plan::FitErrors::absolute : plan::FitErrors::relative);
        inter_samples = fastest.size();
        benchmark_inter_bandwidth = c.inter_node.bandwidth;
        // What training's transfers see across the link, from runs of the engine across the nodes (docs/nodes.md):
        // over TCP they differ from the benchmark's back-to-back collectives and from each other.
        LaunchSpec engine_run = across;
        engine_run.train_binary.clear();
        int serial = 0;
        auto trace_of = [&](std::vector<std::string> args, const std::string& what, int run_steps) {
            const std::string trace = (fs::temp_directory_path() /
                                       fmt::format("ultrascope-calibrate-{}-nodes-{}.ustrace", ::getpid(), serial++))
                                          .string();
            LaunchSpec one = engine_run;
            one.train_args = {"--preset", preset, "--steps", std::to_string(run_steps), "--quiet", "--trace", trace};
            one.train_args.insert(one.train_args.end(), args.begin(), args.end());
            std::fprintf(stderr, "calibrate: %s across the %d emulated nodes\n", what.c_str(), links.nodes);
            run_child(one, what + " across nodes");
            auto store = std::make_unique<prof::TraceStore>();
            prof::load_trace(trace, *store);
            std::error_code gone;
            fs::remove(trace, gone);
            return store;
        };
        const std::string dp = std::to_string(links.nodes);
        // (a) Gradient buckets in flight together after the backward (--no-overlap): the planner prices dp's and
        // ZeRO's buckets with what they saw. (b) The run overlapping in every other step: how much longer the compute
        // beside the hidden buckets ran than the same ops in the steps between (the kernel's network work and the
        // transport's copies share the cores). Each the median of --tries runs: a typical run of this machine.
        std::vector<double> slowdowns, buckets;
        auto median = [](std::vector<double>& v) {
            std::sort(v.begin(), v.end());
            return v.empty() ? 0.0 : v[(v.size() - 1) / 2];
        };
        for (int t = 0; t < tries; ++t) {
            const auto blocking =
                trace_of({"--batch", "4", "--dp", dp, "--no-overlap"}, "a data-parallel run (--no-overlap)", steps);
            if (const double seen = plan::dp_all_reduce_bandwidth(*blocking); seen > 0) buckets.push_back(seen);
            // steps 2.. measured: at least 2 of each kind
            const auto alternating = trace_of({"--batch", "4", "--dp", dp, "--overlap-alternate"},
                                              "a data-parallel run overlapping every other step", std::max(steps, 5));
            if (const double slower = plan::overlap_slowdown(*alternating); slower >= 0) slowdowns.push_back(slower);
        }
        bucket_inter_bandwidth = c.inter_node_bucket_bandwidth = median(buckets);
        if (!slowdowns.empty()) c.inter_node_overlap_slowdown = median(slowdowns);  // else unmeasured: -1
        // (c) Blocking collectives between compute, as tp's, ep's, cp's and pp's are: a tensor-parallel run's
        // all-reduces give the inter-node link's bandwidth (the benchmark's fit keeps its latency).
        TrainConfig shape;
        apply_preset(shape, preset);
        if (shape.model.heads % links.nodes == 0) {
            const auto tp = trace_of({"--tp", dp}, "a tensor-parallel run", steps);
            if (const double seen = plan::tp_all_reduce_bandwidth(*tp); seen > 0)
                c.inter_node.bandwidth = blocking_inter_bandwidth = seen;
        }
        // the file then describes the emulated cluster: this machine's cores shared out over its nodes
        c.nodes = links.nodes;
        c.gpus_per_node = std::max(1, cores / links.nodes);
        c.description += fmt::format("; inter-node link measured between {} emulated nodes ({})", links.nodes,
                                     links.inter_node_gbps > 0 ? fmt::format("tbf {:g} Gbit/s", links.inter_node_gbps)
                                                               : std::string("unshaped veth"));
        c.description += fmt::format(": {:.3f} GB/s for back-to-back collectives (bench_collectives)",
                                     benchmark_inter_bandwidth / 1e9);
        if (blocking_inter_bandwidth > 0)
            c.description += fmt::format(", {:.3f} GB/s for a tensor-parallel run's all-reduces between its compute",
                                         blocking_inter_bandwidth / 1e9);
        if (bucket_inter_bandwidth > 0)
            c.description += fmt::format(", {:.3f} GB/s as a data-parallel run's gradient buckets saw it",
                                         bucket_inter_bandwidth / 1e9);
        if (c.inter_node_overlap_slowdown >= 0)
            c.description +=
                fmt::format("; compute beside hidden transfers {:.0f}% slower", 100 * c.inter_node_overlap_slowdown);
    }

    // 2. Per-op costs: short data-parallel runs of the engine, one thread per rank, two micro-batch sizes so that
    // the GEMM table spans the sizes of smaller and larger layouts.
    plan::OpCostFit fit;
    nlohmann::json runs = nlohmann::json::array();
    const fs::path dir = fs::temp_directory_path() / fmt::format("ultrascope-calibrate-{}", ::getpid());
    fs::create_directories(dir);
    // Each run --tries times; the try whose best steady step's op time is the median of the tries is fitted.
    for (int batch : {8, 2}) {
        TrainConfig cfg;
        apply_preset(cfg, preset);
        cfg.batch = batch;
        cfg.parallel.dp = ranks;
        LaunchSpec run;
        run.ranks = ranks;
        run.threads_per_rank = 1;
        run.train_args = {"--preset", preset,
                          "--batch",  std::to_string(batch),
                          "--dp",     std::to_string(ranks),
                          "--steps",  std::to_string(steps),
                          "--quiet"};
        std::string shown;
        for (const auto& a : run.train_args) shown += " " + a;
        std::vector<std::pair<double, std::unique_ptr<prof::TraceStore>>> candidates;
        for (int t = 0; t < tries; ++t) {
            const std::string trace = (dir / fmt::format("b{}-{}.ustrace", batch, t)).string();
            LaunchSpec one = run;
            one.train_args.insert(one.train_args.end(), {"--trace", trace});
            std::fprintf(stderr, "calibrate: ultrascope-train%s --trace %s (try %d of %d)\n", shown.c_str(),
                         trace.c_str(), t + 1, tries);
            run_child(one, "the measured training run");
            auto candidate = std::make_unique<prof::TraceStore>();
            prof::load_trace(trace, *candidate);
            const double op_s = plan::best_step_compute_s(*candidate);
            if (op_s > 0) candidates.emplace_back(op_s, std::move(candidate));
        }
        // The median try: a typical run of this machine as it is (a prediction is checked against one run), not
        // the luckiest nor the most disturbed.
        std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        std::unique_ptr<prof::TraceStore> store =
            candidates.empty() ? nullptr : std::move(candidates[(candidates.size() - 1) / 2].second);
        US_CHECK_INPUT(store != nullptr, "calibration: the measured runs recorded no steady step (run more --steps)");
        const GPTConfig& g = cfg.model;
        const predict::ModelDesc model =
            predict::engine_model(preset, g.vocab, g.hidden, g.layers, g.heads, g.seq, g.moe_experts, g.moe_topk,
                                  g.moe_every, cfg.moe_capacity_factor);
        predict::Layout layout = predict::layout_from_config(cfg);
        fit.add_run(*store, model, layout);
        runs.push_back("ultrascope-train" + shown);
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
    fit.finish(c);
    c.source =
        fmt::format("measured by `ultrascope calibrate` ({} collective sizes; training runs:{})", samples.size(), [&] {
            std::string s;
            for (const auto& r : runs) s += " " + r.get<std::string>() + ";";
            return s;
        }());
    nlohmann::json j = predict::cluster_to_json(c);
    j["measurements"] = {{"collectives", samples.size()}, {"collectives_between_nodes", inter_samples}, {"runs", runs}};
    std::ofstream file(out);
    file << j.dump(2) << "\n";
    US_CHECK_INPUT(file.good(), "--out '{}': writing failed", out);
    std::printf(
        "Wrote %s: GEMM peak %.2f GFLOP/s per rank (best size), attention at %.0f%% of it, link %.2f GB/s "
        "with %.1f us per hop, host overhead %.1f%% of op time\n",
        out.c_str(), c.peak_flops_fp32 / 1e9, 100 * c.attention_efficiency, c.intra_node.bandwidth / 1e9,
        c.intra_node.latency * 1e6, 100 * c.host_overhead);
    if (links.nodes > 0)
        std::printf(
            "  between the emulated nodes (measured): %.3f GB/s with %.1f us per hop for blocking collectives (%s; "
            "back-to-back in bench_collectives %.3f GB/s); %.3f GB/s for gradient buckets in flight (a data-parallel "
            "run across them); compute beside hidden transfers %s (its steps overlapped against not)\n",
            c.inter_node.bandwidth / 1e9, c.inter_node.latency * 1e6,
            blocking_inter_bandwidth > 0 ? "a tensor-parallel run's all-reduces" : "bench_collectives",
            benchmark_inter_bandwidth / 1e9,
            (bucket_inter_bandwidth > 0 ? bucket_inter_bandwidth : c.inter_node.bandwidth) / 1e9,
            c.inter_node_overlap_slowdown >= 0
                ? fmt::format("{:.0f}% slower", 100 * c.inter_node_overlap_slowdown).c_str()
                : "not measured (nothing ran under a bucket)");
    return 0;
}

}  // namespace us::app
