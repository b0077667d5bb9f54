// `ultrascope run [-n RANKS] [ultrascope-train flags]`: launches the run through mpirun, listens to its live
// stream, shows a progress bar with loss and tokens/s, writes the trace, and prints the report. The exit code is
// the run's: non-zero when mpirun failed or a rank was lost.
#include <fmt/format.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include "app/cli/commands.h"
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
    // Our own flags first (-n, --trace-out, --port); everything else goes to ultrascope-train.
    LiveRunOptions options;
    options.launch.ranks = 0;  // default: the product of the parallel degrees
    std::vector<std::string> train_args;
    int total_steps = -1;
    std::string checkpoint_path;  // --save
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            US_CHECK_INPUT(i + 1 < argc, "{} needs a value", a);
            return argv[++i];
        };
        if (a == "-n" || a == "--ranks") options.launch.ranks = std::atoi(value().c_str());
        else if (a == "--trace") options.trace_path = value();
        else if (a == "--listen") options.listen_host = value();
        else if (a == "--port") options.listen_port = std::atoi(value().c_str());
        else if (a == "--mpirun") options.launch.mpirun = value();
        else if (a == "--store-cap-mib") options.store.max_bytes = parse_store_cap_mib(value());
        else if (a == "--hostfile") options.launch.hostfile = value();
        else if (a == "--launcher") options.launch.launcher = value();
        else if (a == "-h" || a == "--help") {
            std::printf("usage: ultrascope run [-n RANKS] [--trace FILE] [--listen ADDR] [--port P] [--store-cap-mib N]\n"
                        "                      [--hostfile FILE] [--launcher mpirun|srun] "
                        "[ultrascope-train flags]\n"
                        "Launches mpirun -n RANKS (default: dp x pp x ...) ultrascope-train with the given flags, streams it live, writes "
                        "the trace (default runs/run-<time>.ustrace) and prints the report.\n");
            return 0;
        } else train_args.push_back(a);
    }
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
    install_stop_signals();  // before the launch: the run's process group is covered from its first moment
    LiveRun run(options);
    const bool tty = isatty(fileno(stderr));
    std::fprintf(stderr, "ultrascope run: %d rank(s), %d thread(s) each; trace -> %s\n", options.launch.ranks,
                 std::max(1, int(std::thread::hardware_concurrency()) / options.launch.ranks), run.trace_path().c_str());
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
    std::printf("\nTrace: %s  (ultrascope report %s; ultrascope export %s --chrome out.json)\n", run.trace_path().c_str(),
                run.trace_path().c_str(), run.trace_path().c_str());
    const int code = run.result_code();
    if (code != 0) {
        std::fprintf(stderr, "ultrascope run: the run failed (exit code %d)%s\n", run.exit_code().value_or(-1),
                     run.lost_ranks().empty() ? "" : "; lost:");
        for (const auto& l : run.lost_ranks()) std::fprintf(stderr, "  %s\n", l.c_str());
        const auto saved = run.store().latest_counter("checkpoint_step");
        if (!checkpoint_path.empty() && saved)
            std::fprintf(stderr, "ultrascope run: the last checkpoint is step %d in %s: the same command with --load %s "
                                 "continues from there as if it had not stopped\n",
                         int(saved->second.value), checkpoint_path.c_str(), checkpoint_path.c_str());
    }
    return code;
}

}  // namespace us::app
