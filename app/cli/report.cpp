// `ultrascope report TRACE [--json] [--cluster FILE]` (or DUMPS: a hung job's Flight Recorder dumps): who holds the run
// back, the step breakdown per rank, overlap, idle, bubbles, memory peaks measured against predicted, throughput and
// MFU, and what the planner predicts for the same run beside what it measured (step time with a machine file from
// `ultrascope calibrate`; memory always). A run of many rank files is reported from their digests, on this machine's
// cores or split among workers started by mpirun or srun (docs/blame.md). The JSON schema is docs/report-schema.md.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "app/cli/commands.h"
#include "app/cli/parse_flags.h"
#include "app/report/input_kind.h"
#include "app/report/run_report.h"
#include "app/report/snapshot_report.h"
#include "app/report_worker/worker_launch.h"
#include "common/core/check.h"

namespace us::app {

namespace {

// `ultrascope report SNAPSHOT... [--json]`: PyTorch CUDA memory snapshots, one per rank (docs/pytorch-memory.md).
int snapshot_report_command(int argc, char** argv) {
    CLI::App cli{"ultrascope report SNAPSHOT...: what PyTorch CUDA memory snapshots say (docs/pytorch-memory.md)"};
    std::vector<std::string> paths;
    bool json = false;
    cli.add_option("snapshots", paths, "Memory snapshots (torch.cuda.memory._dump_snapshot: .pickle, or JSON)")
        ->required();
    cli.add_flag("--json", json, "The report as JSON: {\"memory_snapshot\": {...}} (docs/pytorch-memory.md)");
    US_PARSE_FLAGS(cli, argc, argv, "report");
    const std::vector<snap::RankSnapshot> ranks = snap::load_rank_snapshots(paths);
    if (json) {
        std::printf("%s\n", snapshot_report_json(ranks).dump(2).c_str());
    } else {
        for (const snap::RankSnapshot& r : ranks) std::printf("%s", format_snapshot_report(r).c_str());
    }
    return 0;
}

}  // namespace

int report_command(int argc, char** argv) {
    // A hung job's Flight Recorder dumps (docs/hangs.md) and PyTorch CUDA memory snapshots (docs/pytorch-memory.md)
    // have their own reports; the GUI tells them the same way (input_kind.h).
    switch (input_kind(command_paths(argc, argv))) {
        case InputKind::flight_dumps:
            return hang_report_command(argc, argv);
        case InputKind::memory_snapshots:
            return snapshot_report_command(argc, argv);
        case InputKind::traces:
            break;
    }
    CLI::App cli{"ultrascope report: what a trace says, next to what the formulas and the planner predict"};
    std::vector<std::string> paths;
    // Required by hand, after the parse: CLI11 checks a missing positional before an unknown flag, and `report
    // --bogus` said "trace is required" without naming the flag.
    cli.add_option("trace", paths, "Trace: a .ustrace file, or PyTorch profiler (Kineto) .json(.gz) files or a folder");
    ReportOptions options;
    add_report_flags(cli, options, ReportFlags::command);
    US_PARSE_FLAGS(cli, argc, argv, "report");
    US_CHECK_INPUT(!paths.empty(),
                   "give a trace: a .ustrace file, PyTorch profiler files or their folder, or a hung job's Flight "
                   "Recorder dumps (see ultrascope report --help)");
    // Under a distributed launcher (mpirun, srun) the MPI worker program does the report: ultrascope links no MPI.
    if (launched_worker_count() > 1) {
        std::vector<std::string> args = {report_worker_binary()};
        for (const std::string& a : worker_args(options)) args.push_back(a);
        args.insert(args.end(), paths.begin(), paths.end());
        std::vector<char*> argv_worker;
        for (std::string& a : args) argv_worker.push_back(a.data());
        argv_worker.push_back(nullptr);
        std::fflush(stdout);
        ::execv(argv_worker[0], argv_worker.data());
        throw UserError(
            fmt::format("cannot start the report's MPI worker '{}': {} (build the target "
                        "ultrascope-report-worker, or set ULTRASCOPE_REPORT_WORKER)",
                        argv_worker[0], std::strerror(errno)));
    }
    const RunReport report = make_run_report(ReportSource::of_files(paths), options);
    std::printf(
        "%s",
        options.json
            ? (run_report_json(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n").c_str()
            : format_run_report(report).c_str());
    std::fflush(stdout);
    return run_report_exit_code(report);
}

}  // namespace us::app
