// `ultrascope run [-n RANKS] [ultrascope-train flags]`: launches the run through mpirun, listens to its live
// stream, shows a progress bar with loss and tokens/s, writes the trace, and prints the report. The exit code is
// the run's: non-zero when mpirun failed or a rank was lost.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

#include "app/cli/commands.h"
#include "app/launch/emulated_nodes.h"
#include "app/launch/rootless_nodes.h"
#include "app/launch/live_run.h"
#include "app/launch/process_guard.h"
#include "common/core/check.h"
#include "common/settings/cli.h"
#include "profiler/analysis/report.h"

namespace us::app {

size_t parse_store_cap_mib(const std::string& text) {
    char* end = nullptr;
    const long long mib = std::strtoll(text.c_str(), &end, 10);
    US_CHECK_INPUT(!text.empty() && *end == '\0' && mib > 0 && mib <= (1ll << 24),
                   "--store-cap-mib '{}': expected a positive number of MiB, e.g. 2048 (the trace file keeps every "
                   "event whatever the cap)",
                   text);
    return size_t(mib) << 20;
}

int run_command(int argc, char** argv) {
    // Our own options (CLI11, like every other command); everything else, in order, goes to ultrascope-train.
    LiveRunOptions options;
    options.launch.ranks = 0;  // default: the product of the parallel degrees
    std::string store_cap_mib;
    CLI::App cli{
        "ultrascope run: launch ultrascope-train through mpirun (or srun), stream it live, write the trace "
        "and print the report",
        "ultrascope run"};
    cli.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    cli.add_option("-n,--ranks", options.launch.ranks, "Ranks (default: dp x pp x tp x cp of the flags)")
        ->type_name("RANKS")
        ->check(CLI::Range(1, 1 << 16));
    cli.add_option("--trace", options.trace_path, "The trace file (default runs/run-<time>.ustrace)")
        ->type_name("FILE");
    cli.add_option("--listen", options.listen_host, "The address the ranks stream back to (default 127.0.0.1)")
        ->type_name("ADDR");
    cli.add_option("--port", options.listen_port, "The port to listen on (default: any free one)")
        ->type_name("P")
        ->check(CLI::Range(0, 65535));
    cli.add_option("--mpirun", options.launch.mpirun, "The mpirun to launch with")->type_name("PATH");
    cli.add_option("--store-cap-mib", store_cap_mib, "Memory cap of the trace kept in memory (the file keeps all)")
        ->type_name("N");
    cli.add_option("--hostfile", options.launch.hostfile, "Launch ranks on the hosts of an Open MPI hostfile")
        ->type_name("FILE");
    cli.add_option("--launcher", options.launch.launcher, "mpirun (default) or srun (inside a Slurm allocation)")
        ->type_name("L");
    NodeLinks links;
    links.nodes = 0;
    cli.add_option("--nodes", links.nodes,
                   "Emulate this many nodes on this machine (network namespaces, root; docs/nodes.md): ranks/nodes "
                   "ranks each, in rank order")
        ->type_name("N");
    cli.add_option("--inter-node-gbps", links.inter_node_gbps, "With --nodes: the links between nodes, Gbit/s (tbf)")
        ->type_name("G");
    cli.add_option("--inter-node-latency-us", links.inter_node_latency_us,
                   "With --nodes: one-way latency between nodes, us (netem, where the kernel has it)")
        ->type_name("L");
    cli.add_option(
           "--node-placement", links.placement,
           "With --nodes: block (consecutive ranks a node: tp inside a node) or cyclic (rank r on node r mod N)")
        ->type_name("P");
    cli.footer("Any other argument is a flag of the launched run (ultrascope-train --help), checked before launch.");
    cli.allow_extras();
    try {
        cli.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
        std::printf("%s", cli.help().c_str());
        return 0;
    } catch (const CLI::ParseError& e) {
        fail_user("ultrascope run: {} (see ultrascope run --help)", e.what());
    }
    if (cli.count("--store-cap-mib")) options.store.max_bytes = parse_store_cap_mib(store_cap_mib);
    const std::vector<std::string> train_args = cli.remaining();
    int total_steps = -1;
    std::string checkpoint_path;  // --save
    // Validate the training flags here, before anything is launched, with the same parser the ranks use.
    {
        std::vector<const char*> args = {"ultrascope-train"};
        for (auto& a : train_args) args.push_back(a.c_str());
        ParsedTrainArgs parsed = parse_train_args(int(args.size()), args.data());
        TrainConfig& cfg = parsed.cmd.config;
        cfg.validate();
        if (options.launch.ranks == 0) options.launch.ranks = cfg.parallel.world();
        US_CHECK_INPUT(cfg.parallel.world() == options.launch.ranks,
                       "-n {} ranks, but the layout dp {} x pp {} x tp {} x cp {} needs {}: set -n to the product of "
                       "the parallel degrees (--ep shares the dp ranks)",
                       options.launch.ranks, cfg.parallel.dp, cfg.parallel.pp, cfg.parallel.tp, cfg.parallel.cp,
                       cfg.parallel.world());
        total_steps = cfg.steps;
        checkpoint_path = cfg.save;
    }
    options.launch.train_args = train_args;
    US_CHECK_INPUT(links.nodes > 0 || (links.inter_node_gbps == 0 && links.inter_node_latency_us == 0 &&
                                       !cli.count("--node-placement")),
                   "--inter-node-gbps, --inter-node-latency-us and --node-placement go with --nodes N");
    if (links.nodes > 0 && ::geteuid() != 0) enter_rootless_namespace();  // while this process has one thread
    install_stop_signals();  // before the launch: the run's process group is covered from its first moment
    options.nodes = links;   // made by the run before its launch, removed when it goes (docs/nodes.md)
    LiveRun run(options);
    if (const EmulatedNodes* nodes = run.nodes())
        std::fprintf(stderr, "ultrascope run: %s\n", nodes->describe().c_str());
    const bool tty = isatty(fileno(stderr));
    std::fprintf(stderr, "ultrascope run: %d rank(s), %d thread(s) each; trace -> %s\n", options.launch.ranks,
                 std::max(1, int(std::thread::hardware_concurrency()) / options.launch.ranks),
                 run.trace_path().c_str());
    double last_print = -1;
    int last_step_printed = 0;
    bool stopping = false;
    while (!run.finished()) {
        run.pump();
        for (const auto& m : run.take_messages()) std::fprintf(stderr, "%s%s\n", tty ? "\r\033[K" : "", m.c_str());
        if (const int sig = stop_signal(); sig != 0 && !stopping) {
            std::fprintf(stderr, "\n%s: stopping the run\n", strsignal(sig));
            run.stop();
            stopping = true;
        }
        const auto latest_loss = run.store().latest_counter("loss");
        const int step = latest_loss ? latest_loss->second.step : 0;
        if (latest_loss && (tty ? run.seconds() - last_print > 0.1 : step != last_step_printed)) {
            const double loss = latest_loss->second.value;
            const auto latest_tps = run.store().latest_counter("tokens_per_s");
            const double tps = latest_tps ? latest_tps->second.value : 0.0;
            const int width = 24;
            const int filled = total_steps > 0 ? std::min(width, step * width / total_steps) : 0;
            const bool every = !tty && (step == 1 || step == total_steps || step % std::max(1, total_steps / 20) == 0);
            if (tty || every)
                std::fprintf(stderr, "%sstep %d/%d [%s%s] loss %.4f | %.0f tok/s | %.0f s%s", tty ? "\r" : "", step,
                             total_steps, std::string(size_t(filled), '=').c_str(),
                             std::string(size_t(width - filled), ' ').c_str(), loss, tps, run.seconds(),
                             tty ? "\033[K" : "\n");
            last_print = run.seconds();
            last_step_printed = step;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    run.pump();
    if (tty) std::fprintf(stderr, "\n");
    prof::Report rep = prof::build_report(run.store());
    std::printf("\n%s", prof::format_report(rep).c_str());
    if (const EmulatedNodes* nodes = run.nodes(); nodes && run.result_code() == 0) {
        const double measured = double(nodes->link_bytes().between_nodes()),
                     formula = prof::inter_node_bytes_formula(rep);
        std::printf(
            "\nBetween the emulated nodes over the whole run: %.2f MB measured (the links' counters: frames with their "
            "headers, every message between the ranks' processes), %.2f MB by the ring formula (the collectives' bytes "
            "whose ring edge crosses nodes, every step)%s\n",
            measured / 1e6, formula / 1e6,
            formula > 0 ? fmt::format(": measured / formula {:.3f}", measured / formula).c_str() : "");
    }
    std::printf("\nTrace: %s  (ultrascope report %s; ultrascope export %s --chrome out.json)\n",
                run.trace_path().c_str(), run.trace_path().c_str(), run.trace_path().c_str());
    const int code = run.result_code();
    if (code != 0) {
        std::fprintf(stderr, "ultrascope run: the run failed (exit code %d)%s\n", run.exit_code().value_or(-1),
                     run.lost_ranks().empty() ? "" : "; lost:");
        for (const auto& l : run.lost_ranks()) std::fprintf(stderr, "  %s\n", l.c_str());
        const auto saved = run.store().latest_counter("checkpoint_step");
        if (!checkpoint_path.empty() && saved)
            std::fprintf(stderr,
                         "ultrascope run: the last checkpoint is step %d in %s: the same command with --load %s "
                         "continues from there as if it had not stopped\n",
                         int(saved->second.value), checkpoint_path.c_str(), checkpoint_path.c_str());
    }
    return code;
}

}  // namespace us::app
