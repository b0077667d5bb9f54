// `ultrascope calibrate [--out FILE]`: measures this machine for `ultrascope plan --cluster FILE` (docs/planner.md,
// "Calibration"). The measurements are launches of child processes (app/launch/machine_calibration.h), so
// `ultrascope` itself links neither MPI nor BLAS; this command parses, checks, runs them and writes the machine file.
// With --nodes N, the link between N emulated nodes too (docs/nodes.md).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <thread>
#include <unistd.h>

#include "app/cli/commands.h"
#include "app/cli/parse_flags.h"
#include "app/launch/launch_options.h"
#include "app/launch/machine_calibration.h"
#include "app/launch/process_guard.h"
#include "app/launch/rootless_nodes.h"
#include "common/core/check.h"
#include "common/core/output_file.h"
#include "common/core/writable_file.h"
#include "common/settings/config.h"

namespace us::app {

namespace {

void check_settings(const CalibrationSettings& s, const std::string& out) {
    US_CHECK_INPUT(s.ranks >= 2, "--ranks must be at least 2 (the links are measured between ranks)");
    US_CHECK_INPUT(s.steps >= 3, "--steps must be at least 3 (step 1 is set-up, not used)");
    US_CHECK_INPUT(s.repeats >= 3, "--repeats must be at least 3");
    US_CHECK_INPUT(s.tries >= 1 && s.tries <= 20, "--tries must be between 1 and 20");
    // Checked before minutes of measuring, and without leaving a file: an empty machine.json made every later
    // report in that folder fail.
    const OutputFile probe(out);  // a folder refused; the file it would replace (links followed), unless a device
    if (const std::string why = probe.in_place() ? "" : why_not_writable_file(probe.target()); !why.empty())
        fail_user("--out '{}': cannot write there: {}", out, why);
    TrainConfig preset;
    apply_preset(preset, s.preset);  // UserError naming the presets for an unknown one
}

void print_summary(const MachineCalibration& m, const std::string& out, bool nodes) {
    const predict::ClusterDesc& c = m.cluster;
    std::printf(
        "Wrote %s: GEMM peak %.2f GFLOP/s per rank (best size), attention at %.0f%% of it, link %.2f GB/s "
        "with %.1f us per hop, host overhead %.1f%% of op time\n",
        out.c_str(), c.peak_flops_fp32 / 1e9, 100 * c.attention_efficiency, c.intra_node.bandwidth / 1e9,
        c.intra_node.latency * 1e6, 100 * c.host_overhead);
    if (!nodes) return;
    std::printf(
        "  between the emulated nodes (measured): %.3f GB/s with %.1f us per hop for blocking collectives (%s; "
        "back-to-back in bench_collectives %.3f GB/s); %.3f GB/s for gradient buckets in flight (a data-parallel "
        "run across them); compute beside hidden transfers %s (its steps overlapped against not)\n",
        c.inter_node.bandwidth / 1e9, c.inter_node.latency * 1e6,
        m.blocking_inter_bandwidth > 0 ? "a tensor-parallel run's all-reduces" : "bench_collectives",
        m.benchmark_inter_bandwidth / 1e9,
        (m.bucket_inter_bandwidth > 0 ? m.bucket_inter_bandwidth : c.inter_node.bandwidth) / 1e9,
        c.inter_node_overlap_slowdown >= 0 ? fmt::format("{:.0f}% slower", 100 * c.inter_node_overlap_slowdown).c_str()
                                           : "not measured (nothing ran under a bucket)");
}

}  // namespace

int calibrate_command(int argc, char** argv) {
    CLI::App cli{
        "ultrascope calibrate: measure this machine's GEMMs, MPI links and per-op costs for `ultrascope plan`"};
    std::string out = "machine.json";
    CalibrationSettings s;
    s.ranks = std::min(2, int(std::max(1u, std::thread::hardware_concurrency())));
    cli.add_option("--out", out, "Machine file to write (default machine.json)");
    cli.add_option("--ranks", s.ranks, "Ranks of the measured runs, one thread each (default: min(2, cores))");
    cli.add_option("--steps", s.steps, "Steps of each measured run (the first is not used)");
    cli.add_option("--preset", s.preset, "Engine preset of the measured runs (default small)");
    cli.add_option("--repeats", s.repeats, "Repetitions per collective size");
    cli.add_option("--tries", s.tries,
                   "Passes of each measurement: collectives keep the fastest, training runs the median (default 3)");
    LaunchOptions where;  // the emulated nodes' flags; each measured run's ranks are chosen by the step
    add_launch_flags(cli, where, LaunchCommand::calibrate);
    US_PARSE_FLAGS(cli, argc, argv, "calibrate");
    check_launch_flags(cli, where);
    validate(where);
    s.nodes = where.hosts.nodes;
    check_settings(s, out);
    s.say = [](const std::string& line) { std::fprintf(stderr, "calibrate: %s\n", line.c_str()); };
    s.pace->fixed_seconds = where.progress_timeout_s;
    if (s.nodes.count > 0 && ::geteuid() != 0)  // while this process has one thread
        for (const std::string& note : enter_rootless_namespace()) s.say(note);
    install_stop_signals();

    const MachineCalibration m = calibrate_machine(s);
    OutputFile written(out);  // whole or not at all: a machine file read later must never be half of one
    {
        std::ofstream file(written.write_to());
        file << m.to_json().dump(2) << "\n";
        US_CHECK_INPUT(file.good() && file.flush(), "--out '{}': writing failed", out);
    }
    written.commit();
    print_summary(m, out, s.nodes.count > 0);
    return 0;
}

}  // namespace us::app
