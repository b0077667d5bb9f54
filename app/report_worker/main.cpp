// ultrascope-report-worker: one worker of `mpirun -n W ultrascope report RUN` (or srun), which `ultrascope report`
// hands over to under a launcher (worker_launch.h). Each worker digests its share of the run's rank files; rank 0
// gathers the digests and prints the report (docs/blame.md). A worker that fails takes the launch down with it
// (MPI_Abort): none is left waiting in the gather.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "app/report_worker/report_workers.h"
#include "common/core/check.h"
#include "profiler/runs/digest_report.h"

int main(int argc, char** argv) {
    us::app::ReportWorkers workers;
    try {
        CLI::App cli{
            "One worker of a distributed `ultrascope report` (started by `ultrascope report` under mpirun or srun)",
            "ultrascope-report-worker"};
        std::vector<std::string> paths;
        bool json = false, no_cache = false;
        int threads = 0;
        size_t cap_mib = us::prof::TraceStoreOptions{}.max_bytes >> 20;
        cli.add_option("trace", paths, "The run: Kineto files or their folder, or one Ultrascope trace")->required();
        cli.add_flag("--json", json, "The report as JSON");
        cli.add_flag("--no-cache", no_cache, "Neither read nor write the digests kept beside the traces");
        cli.add_option("--threads", threads, "Threads digesting this worker's files (default: one per core)");
        cli.add_option("--store-cap-mib", cap_mib, "Memory cap of one rank's events while it is digested");
        CLI11_PARSE(cli, argc, argv);
        workers = us::app::start_report_workers();
        us::prof::DigestOptions options;
        options.threads = threads, options.use_cache = !no_cache;
        options.store = us::prof::TraceStoreOptions{cap_mib << 20};
        us::prof::RunDigests mine = us::prof::digest_run(paths, options, workers.rank, workers.size);
        us::prof::RunDigests all = us::app::gather_digests(std::move(mine), workers);
        int code = 0;
        if (workers.rank == 0) {
            const us::prof::DigestReport rep = us::prof::digest_report(std::move(all), workers.size);
            std::printf("%s", json ? (us::prof::digest_report_json(rep).dump(2) + "\n").c_str()
                                   : us::prof::format_digest_report(rep).c_str());
            std::fflush(stdout);
            code = us::prof::digest_report_exit_code(rep);
        }
        us::app::stop_report_workers(workers);
        return code;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ultrascope report (worker %d of %d): error: %s\n", workers.rank, workers.size, e.what());
        us::app::abort_report_workers(workers, 2);
        return 2;
    }
}
