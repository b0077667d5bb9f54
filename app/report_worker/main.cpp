// ultrascope-report-worker: one worker of `mpirun -n W ultrascope report RUN` (or srun), which `ultrascope report`
// hands over to under a launcher (worker_launch.h). Each worker digests its share of the run's rank files; rank 0
// gathers the digests and prints the report (docs/blame.md). A worker that fails takes the launch down with it
// (MPI_Abort): none is left waiting in the gather.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "app/report_worker/report_workers.h"
#include "common/core/check.h"
#include "app/report/run_report.h"

int main(int argc, char** argv) {
    us::app::ReportWorkers workers;
    try {
        CLI::App cli{
            "One worker of a distributed `ultrascope report` (started by `ultrascope report` under mpirun or srun)",
            "ultrascope-report-worker"};
        std::vector<std::string> paths;
        cli.add_option("trace", paths, "The run: Kineto files or their folder, or one Ultrascope trace")->required();
        us::app::ReportOptions options;  // `ultrascope report`'s, handed over unchanged (report_options.h)
        us::app::add_report_flags(cli, options, us::app::ReportFlags::worker);
        CLI11_PARSE(cli, argc, argv);
        workers = us::app::start_report_workers();
        us::prof::DigestOptions digesting;
        digesting.threads = options.threads, digesting.use_cache = !options.no_cache;
        digesting.store = us::prof::TraceStoreOptions{options.store_cap_bytes()};
        us::prof::RunDigests mine = us::prof::digest_run(paths, digesting, workers.rank, workers.size);
        us::prof::RunDigests all = us::app::gather_digests(std::move(mine), workers);
        int code = 0;
        if (workers.rank == 0) {  // the report, as `ultrascope report` makes it from these digests
            const us::app::RunReport report = us::app::make_run_report(
                us::app::ReportSource::of_digests(std::move(all), paths, workers.size), options);
            std::printf("%s", options.json ? (us::app::run_report_json(report).dump(2) + "\n").c_str()
                                           : us::app::format_run_report(report).c_str());
            std::fflush(stdout);
            code = us::app::run_report_exit_code(report);
        }
        us::app::stop_report_workers(workers);
        return code;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ultrascope report (worker %d of %d): error: %s\n", workers.rank, workers.size, e.what());
        us::app::abort_report_workers(workers, 2);
        return 2;
    }
}
