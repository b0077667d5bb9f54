#include "app/report/run_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "common/core/check.h"
#include "profiler/analysis/imported_report.h"
#include "profiler/hang/hang_report.h"
#include "profiler/import/run_files.h"

namespace us::app {

ReportSource ReportSource::of_files(std::vector<std::string> paths) {
    ReportSource s;
    s.paths = std::move(paths);
    return s;
}

ReportSource ReportSource::of_store(const prof::TraceStore& store, std::string trace_path) {
    ReportSource s;
    s.kind = Kind::store;
    s.store = &store;
    if (!trace_path.empty()) s.paths = {std::move(trace_path)};
    return s;
}

ReportSource ReportSource::of_digests(prof::RunDigests run, std::vector<std::string> paths, int workers) {
    ReportSource s;
    s.kind = Kind::digests;
    s.digests = std::move(run);
    s.paths = std::move(paths);
    s.workers = workers;
    return s;
}

namespace {

prof::DigestOptions digest_options(const ReportOptions& o) {
    prof::DigestOptions d;
    d.threads = o.threads, d.use_cache = !o.no_cache;
    d.store = prof::TraceStoreOptions{o.store_cap_bytes()};
    return d;
}

// The files of the ranks asked for, found through the run's digests (cached beside the traces).
std::vector<std::string> files_of_ranks(const prof::RunDigests& run, const std::vector<int>& ranks) {
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

// The planner's machine file: as given (it must load: resolved before anything is read), else ./machine.json when
// there is one, else none (memory only), with the sentence the report says about it.
struct PlannerCluster {
    std::optional<predict::ClusterDesc> cluster;
    std::string source;
};
PlannerCluster planner_cluster(const ReportOptions& o) {
    if (!o.planner) return {};
    if (!o.cluster_file.empty()) {
        US_CHECK_INPUT(std::filesystem::exists(o.cluster_file), "--cluster '{}': no such file", o.cluster_file);
        return {predict::load_cluster(o.cluster_file), o.cluster_file};
    }
    if (std::filesystem::exists("machine.json")) return {predict::load_cluster("machine.json"), "machine.json"};
    return {std::nullopt,
            "no calibration of this machine (no --cluster FILE, no ./machine.json): make one with "
            "`ultrascope calibrate --out machine.json`, then `ultrascope report TRACE --cluster machine.json`"};
}

// One report being built: what it is asked, and the machine file the planner's side uses.
struct Builder {
    const ReportOptions& options;
    PlannerCluster planner = planner_cluster(options);
    RunReport r;

    // The planner's side: a trace whose config it cannot describe still gets the rest of the report.
    void compare_with_planner() {
        if (!options.planner) {
            r.planner_error = "not asked";
            return;
        }
        try {
            if (r.whole->is_predicted())
                r.planner_error = "this trace is the planner's own prediction (nothing measured to compare)";
            else if (r.run.imported())
                r.planner_error = prof::imported_planner_note();
            else
                r.planner = plan::compare_plan_with_run(*r.store, *r.whole, planner.cluster, planner.source);
        } catch (const UserError& e) {
            r.planner_error = e.what();
        }
    }

    // The run held whole: its report, and what the planner predicts beside it.
    void report_whole(const std::vector<std::string>& warnings) {
        r.run = prof::run_info_of(*r.store);
        r.whole = prof::build_report(*r.store, options.microbatches);
        r.whole->warnings.insert(r.whole->warnings.begin(), warnings.begin(), warnings.end());
        r.hang = run_hang_of(*r.store);
        compare_with_planner();
    }

    // Loads `opened` (the run's files, or the ranks asked for) whole; the memory categories come from `paths`.
    void load_whole(const std::vector<std::string>& paths, const std::vector<std::string>& opened) {
        auto store = std::make_shared<prof::TraceStore>(prof::TraceStoreOptions{options.store_cap_bytes()});
        std::vector<prof::KinetoMemoryEvents> memory;  // the [memory] events, kept by the loader's one pass
        const auto warnings = prof::load_run(opened, *store, &memory);
        r.owned_store = store;
        r.store = store.get();
        report_whole(warnings);
        // The memory profiler's categories, when its timeline export lies beside the trace, and those inferred from
        // the ops (docs/pytorch-memory.md).
        r.categories = prof::load_memory_categories(paths, *store, r.run, memory);
    }

    // The run's digests: its report from them (--digests, or no ranks asked for), else the ranks asked for whole.
    void report_digests(prof::RunDigests run, const std::vector<std::string>& paths, int workers) {
        if (options.ranks.empty() || options.digests_only) {
            r.digests = prof::digest_report(std::move(run), workers);
            return;
        }
        load_whole(paths, files_of_ranks(run, options.ranks));
        // Who holds the run back is a question about every rank: blame, the waits and the pipelines come from all
        // the run's digests, not from the ranks opened (which alone would name one of them).
        const size_t all = run.ranks.size();
        r.whole->cross = prof::cross_rank(std::move(run.ranks), {.microbatches = options.microbatches});
        r.whole->warnings.insert(r.whole->warnings.begin(),
                                 fmt::format("--rank: who holds the run back, the waits and the pipelines are over "
                                             "all {} ranks read (their digests); the rest of the report is the "
                                             "ranks opened whole",
                                             all));
    }
};

}  // namespace

RunReport make_run_report(ReportSource source, const ReportOptions& options) {
    Builder b{options};
    for (const auto& p : source.paths) b.r.shown += (b.r.shown.empty() ? "" : " ") + p;
    switch (source.kind) {
        case ReportSource::Kind::store:
            b.r.store = source.store;
            b.report_whole({});
            break;
        case ReportSource::Kind::digests:
            b.report_digests(std::move(*source.digests), source.paths, source.workers);
            break;
        case ReportSource::Kind::files: {
            // Beyond kWholeRunRanks rank files a run is reported from its digests, unless ranks are asked for whole.
            const prof::RunFiles files = prof::find_run_files(source.paths);
            const bool large = !files.ultrascope && files.files.size() > prof::kWholeRunRanks;
            if (options.digests_only || (!files.ultrascope && (large || !options.ranks.empty())))
                b.report_digests(prof::digest_run(source.paths, digest_options(options)), source.paths, 1);
            else
                b.load_whole(source.paths, source.paths);
            US_CHECK_INPUT(!b.r.store || b.r.store->rank_count() > 0,
                           "{}: no rank's data in it (a run that ended before any rank sent anything): nothing to "
                           "report",
                           b.r.shown);
            break;
        }
    }
    return std::move(b.r);
}

nlohmann::json run_report_json(const RunReport& r) {
    if (r.digests) return prof::digest_report_json(*r.digests);
    nlohmann::json j = prof::report_json(*r.whole);
    j["planner"] = r.planner ? plan::plan_vs_run_json(*r.planner) : nlohmann::json{{"error", r.planner_error}};
    j["run"] = prof::to_json(r.run);
    if (r.hang) j["hang"] = hang::hang_json(r.hang->analysis);
    if (r.run.imported()) {
        prof::mark_imported_unknowns(j, *r.store);  // unknown, not zero
        if (!r.categories.empty()) j["memory_categories"] = prof::memory_categories_json(r.categories);
    }
    return j;
}

std::string format_run_report(const RunReport& r) {
    if (r.digests) return prof::format_digest_report(*r.digests);
    std::string s = fmt::format("Trace {}\n", r.shown);
    if (r.hang) s += "\nThe run hung. " + hang::format_hang(r.hang->analysis);
    s += fmt::format("{}\n{}{}", prof::format_blame(r.whole->cross.blame),
                     r.run.imported() ? prof::imported_header(r.run, *r.store) : "", prof::format_report(*r.whole));
    s += prof::format_memory_categories(r.categories);
    s += r.planner ? plan::format_plan_vs_run(*r.planner) : "\nPlanner: not compared: " + r.planner_error + "\n";
    return s;
}

int run_report_exit_code(const RunReport& r) { return r.digests ? prof::digest_report_exit_code(*r.digests) : 0; }

}  // namespace us::app
