// `ultrascope run [-n RANKS] [ultrascope-train flags]`: launches the run through mpirun, listens to its live
// stream, shows a progress bar with loss and tokens/s, writes the trace, and prints the report. The exit code is
// the run's: non-zero when mpirun failed or a rank was lost. The launching is the launch library's (LiveRun); this
// file parses, checks, watches and prints, in named steps.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>

#include "app/cli/commands.h"
#include "app/report/run_report.h"
#include "app/launch/emulated_nodes.h"
#include "app/launch/launch_options.h"
#include "app/launch/live_run.h"
#include "app/launch/process_guard.h"
#include "app/launch/rootless_nodes.h"
#include "common/core/check.h"
#include "common/settings/input_files.h"
#include "common/core/writable_file.h"
#include "common/settings/cli.h"
#include "profiler/analysis/report.h"

namespace us::app {

namespace {

// What the run's own training flags say that the watching needs.
struct RunFacts {
    int total_steps = -1;
    std::string checkpoint_path;  // --save
};

// Our own options (CLI11, like every other command); everything else, in order, goes to ultrascope-train. Empty when
// --help was asked for (the help is printed).
std::optional<LiveRunOptions> parse_run_flags(int argc, char** argv) {
    LiveRunOptions options;
    std::string store_cap_mib;
    CLI::App cli{
        "ultrascope run: launch ultrascope-train through mpirun (or srun), stream it live, write the trace "
        "and print the report",
        "ultrascope run"};
    cli.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    add_launch_flags(cli, options.launch, LaunchCommand::run);
    cli.add_option("--trace", options.trace_path, "The trace file (default runs/run-<time>.ustrace)")
        ->type_name("FILE");
    cli.add_option("--port", options.listen_port, "The port to listen on (default: any free one)")
        ->type_name("P")
        ->check(CLI::Range(0, 65535));
    cli.add_option("--store-cap-mib", store_cap_mib, "Memory cap of the trace kept in memory (the file keeps all)")
        ->type_name("N");
    cli.footer("Any other argument is a flag of the launched run (ultrascope-train --help), checked before launch.");
    cli.allow_extras();
    try {
        cli.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
        std::printf("%s", cli.help().c_str());
        return std::nullopt;
    } catch (const CLI::ParseError& e) {
        fail_user("{} (see ultrascope run --help)", e.what());
    }
    if (cli.count("--store-cap-mib")) options.store.max_bytes = parse_store_cap_mib(store_cap_mib);
    options.train_args = cli.remaining();
    check_launch_flags(cli, options.launch);
    return options;
}

// The training flags, validated here before anything is launched with the same parser the ranks use; the ranks
// default to the layout's and must match it. Then every launch option's rule (launch_options.h).
RunFacts check_run(LiveRunOptions& options) {
    std::vector<const char*> args = {"ultrascope-train"};
    for (auto& a : options.train_args) args.push_back(a.c_str());
    ParsedTrainArgs parsed = parse_train_args(int(args.size()), args.data());
    TrainConfig& cfg = parsed.cmd.config;
    cfg.validate();
    int& ranks = options.launch.ranks;
    if (ranks == 0) ranks = cfg.parallel.world();
    US_CHECK_INPUT(cfg.parallel.world() == ranks,
                   "-n {} ranks, but the layout dp {} x pp {} x tp {} x cp {} needs {}: set -n to the product of "
                   "the parallel degrees (--ep shares the dp ranks)",
                   ranks, cfg.parallel.dp, cfg.parallel.pp, cfg.parallel.tp, cfg.parallel.cp, cfg.parallel.world());
    validate(options.launch);
    // Where the ranks run on this machine (emulated nodes share its files), a --save it cannot write is refused
    // before the launch, as rank 0 would refuse it before step 1: nothing launched, no trace written.
    const HostOptions& hosts = options.launch.hosts;
    if (!cfg.save.empty() && hosts.hostfile.empty() && hosts.launcher == "mpirun")
        if (const std::string why = why_not_writable_file(cfg.save); !why.empty())
            fail_user("cannot write --save '{}': {}; check the path (nothing was launched)", cfg.save, why);
    // So are --load and --data it cannot read: the trace, written as the run starts, keeps what was there.
    if (hosts.hostfile.empty() && hosts.launcher == "mpirun")
        if (const std::string why = unreadable_input(cfg); !why.empty())
            fail_user("{}; check the path (nothing was launched)", why);
    return RunFacts{cfg.steps, cfg.save};
}

// One progress line: a bar redrawn in place on a terminal, a line per twentieth of the run otherwise.
class Progress {
public:
    explicit Progress(int total_steps) : m_total(total_steps), m_tty(isatty(fileno(stderr))) {}
    bool tty() const { return m_tty; }
    void update(const LiveRun& run) {
        const auto latest_loss = run.store().latest_counter("loss");
        const int step = latest_loss ? latest_loss->second.step : 0;
        if (!latest_loss || !(m_tty ? run.seconds() - m_last_print > 0.1 : step != m_last_step)) return;
        const auto latest_tps = run.store().latest_counter("tokens_per_s");
        const double tps = latest_tps ? latest_tps->second.value : 0.0;
        const int width = 24;
        const int filled = m_total > 0 ? std::min(width, step * width / m_total) : 0;
        const bool every = !m_tty && (step == 1 || step == m_total || step % std::max(1, m_total / 20) == 0);
        if (m_tty || every)
            std::fprintf(stderr, "%sstep %d/%d [%s%s] loss %.4f | %.0f tok/s | %.0f s%s", m_tty ? "\r" : "", step,
                         m_total, std::string(size_t(filled), '=').c_str(),
                         std::string(size_t(width - filled), ' ').c_str(), latest_loss->second.value, tps,
                         run.seconds(), m_tty ? "\033[K" : "\n");
        m_last_print = run.seconds();
        m_last_step = step;
    }

private:
    int m_total;
    bool m_tty;
    double m_last_print = -1;
    int m_last_step = 0;
};

// Pumps the run until it ends: its messages, a stop signal (stops it once), the progress line.
void watch(LiveRun& run, int total_steps) {
    Progress progress(total_steps);
    bool stopping = false;
    while (!run.finished()) {
        run.pump();
        for (const auto& m : run.take_messages())
            std::fprintf(stderr, "%s%s\n", progress.tty() ? "\r\033[K" : "", m.c_str());
        if (const int sig = stop_signal(); sig != 0 && !stopping) {
            std::fprintf(stderr, "\n%s: stopping the run\n", strsignal(sig));
            run.stop();
            stopping = true;
        }
        progress.update(run);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    run.pump();
    if (progress.tty()) std::fprintf(stderr, "\n");
}

// The report (the document `ultrascope report` prints on the run's trace), and on emulated nodes the bytes their
// links carried beside the ring formula's.
void print_report(const LiveRun& run) {
    const RunReport report = make_run_report(ReportSource::of_store(run.store(), run.trace_path()), ReportOptions{});
    const prof::Report& rep = *report.whole;
    std::printf("\n%s", format_run_report(report).c_str());
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
}

// A failed or stopped run: why, its exit code, the ranks lost, and the checkpoint to continue from.
void print_failure(const LiveRun& run, const RunFacts& facts, int code, int stopped_by) {
    if (stopped_by != 0) {
        std::fprintf(stderr, "ultrascope run: stopped by %s (exit code %d)\n", strsignal(stopped_by), code);
    } else {
        // mpirun passes a rank's death by a signal on as 128 + the signal: say which (a SIGKILL is the OOM killer's)
        const std::string by_signal = code > 128 && code < 128 + 65 ? fmt::format(": a process ended by signal {} ({})",
                                                                                  code - 128, strsignal(code - 128))
                                                                    : std::string();
        std::fprintf(stderr, "ultrascope run: the run %s (exit code %d%s)%s\n",
                     run.hung() ? "hung and was ended" : "failed", code, by_signal.c_str(),
                     run.lost_ranks().empty() ? "" : "; lost:");
        for (const auto& l : run.lost_ranks()) std::fprintf(stderr, "  %s\n", l.c_str());
    }
    const auto saved = run.store().latest_counter("checkpoint_step");
    if (!facts.checkpoint_path.empty() && saved)
        std::fprintf(stderr,
                     "ultrascope run: the last checkpoint is step %d in %s: the same command with --load %s "
                     "continues from there as if it had not stopped\n",
                     int(saved->second.value), facts.checkpoint_path.c_str(), facts.checkpoint_path.c_str());
}

}  // namespace

int run_command(int argc, char** argv) {
    std::optional<LiveRunOptions> options = parse_run_flags(argc, argv);
    if (!options) return 0;
    const RunFacts facts = check_run(*options);
    if (options->launch.hosts.nodes.count > 0 && ::geteuid() != 0)  // while this process has one thread
        for (const std::string& note : enter_rootless_namespace())
            std::fprintf(stderr, "ultrascope run: %s\n", note.c_str());
    install_stop_signals();  // before the launch: the run's process group is covered from its first moment
    LiveRun run(*options);   // emulated nodes are made before its launch, removed when it goes (docs/nodes.md)
    if (const EmulatedNodes* nodes = run.nodes())
        std::fprintf(stderr, "ultrascope run: %s\n", nodes->describe().c_str());
    const int ranks = options->launch.ranks;
    std::fprintf(stderr, "ultrascope run: %d rank(s), %d thread(s) each; trace -> %s\n", ranks, run.threads_per_rank(),
                 run.trace_path().c_str());
    watch(run, facts.total_steps);
    if (run.hung())  // never a silent hang: the dumps are in the trace, the report below analyses them
        std::fprintf(stderr,
                     "ultrascope run: %s: the ranks' flight recorder dumps are in the trace (%zu of %d rank(s) sent "
                     "one); see the hang report below\n",
                     run.hang_summary().c_str(), run.ranks_dumped().size(), ranks);
    // Stopped on purpose: the shell's code for a stop by that signal, whatever mpirun returned.
    const int sig = stop_signal();
    int code = sig != 0 ? 128 + sig : run.result_code();
    if (run.store().rank_count() > 0) {
        print_report(run);
    } else {  // nothing arrived: no report of nothing, and no empty trace left behind
        std::error_code ignored;
        std::filesystem::remove(run.trace_path(), ignored);
        std::fprintf(stderr, "ultrascope run: no rank sent anything, so there is no report and no trace (%s removed)\n",
                     run.trace_path().c_str());
        if (code == 0) code = 1;
    }
    std::fflush(stdout);  // the report whole before the failure's lines on stderr (a terminal shows both)
    if (code != 0) print_failure(run, facts, code, sig);
    return code;
}

}  // namespace us::app
