// A run's report: the one document `ultrascope report` prints, its MPI worker prints, `ultrascope run` prints at the
// end of a run, the lessons check their claims against and the GUI's views draw (docs/report-schema.md). It is
// built here only, by make_run_report, from what there is: the trace files (held whole, or from their ranks' digests
// when the run is large), a trace store already filled (a live run), or the digests gathered by the MPI workers.
// The document opens with what held the run when it hung (its ranks' flight recorder dumps), who holds it back, then
// the step breakdown per rank (profiler/analysis/report.h), the memory categories of an imported run, and what the
// planner predicts beside what was measured.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app/plan/plan_vs_run.h"
#include "app/report/run_hang.h"
#include "app/report/report_options.h"
#include "profiler/analysis/report.h"
#include "profiler/import/memory_categories.h"
#include "profiler/runs/digest_report.h"
#include "profiler/trace/run_info.h"
#include "profiler/trace/trace_store.h"

namespace us::app {

// What the report is of.
struct ReportSource {
    enum class Kind { files, store, digests };
    Kind kind = Kind::files;
    std::vector<std::string> paths;           // files, and the names the report shows
    const prof::TraceStore* store = nullptr;  // store: a run already held (not owned)
    std::optional<prof::RunDigests> digests;  // digests: gathered by `workers` processes
    int workers = 1;

    static ReportSource of_files(std::vector<std::string> paths);
    static ReportSource of_store(const prof::TraceStore& store, std::string trace_path = "");
    static ReportSource of_digests(prof::RunDigests run, std::vector<std::string> paths, int workers);
};

struct RunReport {
    std::string shown;  // what was reported: the paths, or the live run's trace file
    // The run held whole (every rank's spans), or only its digests: one of the two.
    std::optional<prof::Report> whole;
    std::optional<prof::DigestReport> digests;
    std::shared_ptr<const prof::TraceStore> owned_store;  // the store `whole` was built from, when loaded here
    const prof::TraceStore* store = nullptr;
    prof::RunInfo run;
    std::vector<prof::RankMemoryCategories> categories;  // an imported run's, from the memory profiler or inferred
    std::optional<plan::PlanVsRun> planner;              // or why there is no comparison
    std::string planner_error;
    std::optional<RunHang> hang;  // the run hung and its ranks sent their flight recorder dumps: what held it
};

RunReport make_run_report(ReportSource source, const ReportOptions& options);

nlohmann::json run_report_json(const RunReport& r);
std::string format_run_report(const RunReport& r);
// 0; from digests 3 when some files could not be read (each named in the report).
int run_report_exit_code(const RunReport& r);

}  // namespace us::app
