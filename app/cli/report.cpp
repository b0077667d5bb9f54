// `ultrascope report TRACE [--json] [--cluster FILE]`: who holds the run back, the step breakdown per rank, overlap,
// idle, bubbles, memory peaks measured against predicted, throughput and MFU, and what the planner predicts for the
// same run beside what it measured (step time with a machine file from `ultrascope calibrate`; memory always). A
// run of many rank files is reported from their digests, on this machine's cores or split among workers started by
// mpirun or srun (docs/blame.md). The JSON schema is docs/report-schema.md.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "app/cli/commands.h"
#include "app/report_worker/worker_launch.h"
#include "app/cli/snapshot_report.h"
#include "app/plan/plan_vs_run.h"
#include "common/core/check.h"
#include "profiler/analysis/imported_report.h"
#include "profiler/import/memory_categories.h"
#include "profiler/analysis/report.h"
#include "profiler/import/run_files.h"
#include "profiler/runs/digest_report.h"
#include "profiler/trace/run_info.h"

namespace us::app {

namespace {

// The files of the ranks asked for, found through the run's digests (cached beside the traces).
std::vector<std::string> files_of_ranks(const std::vector<std::string>& paths, const std::vector<int>& ranks,
                                        const prof::DigestOptions& options) {
    const prof::RunDigests run = prof::digest_run(paths, options);
    std::vector<std::string> out;
    for (int r : ranks) {
        auto it =
            std::find_if(run.ranks.begin(), run.ranks.end(), [&](const prof::RankDigest& d) { return d.rank == r; });
        US_CHECK_INPUT(it != run.ranks.end(), "--rank {}: the run has no rank {} ({} ranks read{})", r, r,
                       run.ranks.size(),
                       run.errors.empty() ? "" : "; some files failed: see the report without --rank");
        out.push_back(it->file);
    }
    return out;
}

}  // namespace

int report_command(int argc, char** argv) {
    // PyTorch CUDA memory snapshots (.pickle, or their JSON form) have their own report (docs/pytorch-memory.md).
    if (argc > 1 && snap::is_memory_snapshot_path(argv[1])) return snapshot_report_command(argc, argv);
    CLI::App cli{"ultrascope report: what a trace says, next to what the formulas and the planner predict"};
    std::string cluster_file;
    std::vector<std::string> paths;
    bool json = false;
    cli.add_option("trace", paths, "Trace: a .ustrace file, or PyTorch profiler (Kineto) .json(.gz) files or a folder")
        ->required();
    cli.add_flag("--json", json, "Print the report as JSON (docs/report-schema.md)");
    cli.add_option("--cluster", cluster_file,
                   "Machine file for the planner's step time (from `ultrascope calibrate`; default ./machine.json "
                   "when present)");
    size_t cap_mib = prof::TraceStoreOptions{}.max_bytes >> 20;
    cli.add_option("--store-cap-mib", cap_mib, "Memory cap of the events kept for the analysis (docs/trace-format.md)")
        ->check(CLI::PositiveNumber);
    int microbatches = 0;
    cli.add_option(
           "--microbatches", microbatches,
           "Micro-batches per step of an imported pipelined run, for its (p - 1) / m bubble (docs/report-schema.md)")
        ->check(CLI::PositiveNumber);
    bool digests_only = false, no_cache = false;
    std::vector<int> ranks;
    int threads = 0;
    cli.add_flag("--digests", digests_only,
                 "Report from the ranks' digests only (the default beyond 64 rank files; docs/blame.md)");
    cli.add_option("--rank", ranks, "Open these ranks whole (a large run's others stay digests)")->delimiter(',');
    cli.add_option("--threads", threads, "Workers digesting rank files (default: one per core)")
        ->check(CLI::PositiveNumber);
    cli.add_flag("--no-cache", no_cache, "Neither read nor write the digests kept beside the traces");
    CLI11_PARSE(cli, argc, argv);
    // The machine file: as given (it must load), else ./machine.json when there is one, else none (memory only).
    std::optional<predict::ClusterDesc> cluster;
    std::string cluster_source;
    if (!cluster_file.empty()) {
        US_CHECK_INPUT(std::filesystem::exists(cluster_file), "--cluster '{}': no such file", cluster_file);
        cluster = predict::load_cluster(cluster_file), cluster_source = cluster_file;
    } else if (std::filesystem::exists("machine.json")) {
        cluster = predict::load_cluster("machine.json"), cluster_source = "machine.json";
    } else {
        cluster_source =
            "no calibration of this machine (no --cluster FILE, no ./machine.json): make one with "
            "`ultrascope calibrate --out machine.json`, then `ultrascope report TRACE --cluster machine.json`";
    }
    // A run of many rank files, or one split among workers (mpirun, srun), is reported from its digests.
    prof::DigestOptions digest_options;
    digest_options.threads = threads, digest_options.use_cache = !no_cache;
    digest_options.store = prof::TraceStoreOptions{cap_mib << 20};
    // Under a distributed launcher (mpirun, srun) the MPI worker program does the report: ultrascope links no MPI.
    if (launched_worker_count() > 1) {
        std::vector<std::string> args = {report_worker_binary(), "--store-cap-mib", std::to_string(cap_mib)};
        if (json) args.push_back("--json");
        if (no_cache) args.push_back("--no-cache");
        if (threads > 0) args.insert(args.end(), {"--threads", std::to_string(threads)});
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
    const prof::RunFiles files = prof::find_run_files(paths);
    if (digests_only || (!files.ultrascope && files.files.size() > prof::kWholeRunRanks && ranks.empty())) {
        const prof::DigestReport rep = prof::digest_report(prof::digest_run(paths, digest_options));
        std::printf("%s", json ? (prof::digest_report_json(rep).dump(2) + "\n").c_str()
                               : prof::format_digest_report(rep).c_str());
        std::fflush(stdout);
        return prof::digest_report_exit_code(rep);
    }
    std::vector<std::string> opened = paths;
    if (!ranks.empty() && !files.ultrascope) opened = files_of_ranks(paths, ranks, digest_options);
    prof::TraceStore store(prof::TraceStoreOptions{cap_mib << 20});
    std::vector<prof::KinetoMemoryEvents> memory;  // the [memory] events, kept by the loader's one pass
    const auto warnings = prof::load_run(opened, store, &memory);
    const prof::RunInfo run = prof::run_info_of(store);
    // The memory profiler's categories, when its timeline export lies beside the trace, and those inferred from the
    // ops (docs/pytorch-memory.md).
    const auto categories = prof::load_memory_categories(paths, store, run, memory);
    prof::Report rep = prof::build_report(store, microbatches);
    rep.warnings.insert(rep.warnings.begin(), warnings.begin(), warnings.end());
    // The planner's side: a trace whose config it cannot describe still gets the rest of the report.
    std::optional<plan::PlanVsRun> cmp;
    std::string planner_error;
    try {
        if (rep.is_predicted())
            planner_error = "this trace is the planner's own prediction (nothing measured to compare)";
        else if (run.imported())
            planner_error = prof::imported_planner_note();
        else
            cmp = plan::compare_plan_with_run(store, rep, cluster, cluster_source);
    } catch (const UserError& e) {
        planner_error = e.what();
    }
    if (json) {
        nlohmann::json j = prof::report_json(rep);
        j["planner"] = cmp ? plan::plan_vs_run_json(*cmp) : nlohmann::json{{"error", planner_error}};
        j["run"] = prof::to_json(run);
        if (run.imported()) {
            prof::mark_imported_unknowns(j, store);  // unknown, not zero
            if (!categories.empty()) j["memory_categories"] = prof::memory_categories_json(categories);
        }
        std::printf("%s\n", j.dump(2).c_str());
    } else {
        std::string shown;
        for (const auto& p : paths) shown += (shown.empty() ? "" : " ") + p;
        std::printf("Trace %s\n%s\n%s%s", shown.c_str(), prof::format_blame(rep.cross.blame).c_str(),
                    run.imported() ? prof::imported_header(run, store).c_str() : "", prof::format_report(rep).c_str());
        std::printf("%s", prof::format_memory_categories(categories).c_str());
        std::printf("%s", cmp ? plan::format_plan_vs_run(*cmp).c_str()
                              : ("\nPlanner: not compared: " + planner_error + "\n").c_str());
    }
    return 0;
}

}  // namespace us::app
