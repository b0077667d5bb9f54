// What a run's report is asked for: the options of `ultrascope report`, of its MPI worker and of the GUI's command
// line, declared once. add_report_flags registers them on a parser (each caller the set it takes), and
// worker_args hands them to the MPI worker unchanged, so no caller declares a flag of the report again.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>
#include <vector>

namespace us::app {

struct ReportOptions {
    bool json = false;
    std::string cluster_file;   // the planner's machine file; empty: ./machine.json when there is one
    size_t store_cap_mib = 0;   // memory cap of the events kept for the analysis; 0: the trace store's default
    int microbatches = 0;       // an imported pipelined run's micro-batches per step, for its (p - 1) / m bubble
    bool digests_only = false;  // report from the digests even for a small run
    std::vector<int> ranks;     // ranks opened whole (a large run's others stay digests)
    int threads = 0;            // workers digesting rank files; 0: one per core
    bool no_cache = false;      // neither read nor write the digests kept beside the traces
    bool planner = true;        // compare with the planner's prediction (the GUI shows its own planner view)

    size_t store_cap_bytes() const;
};

// Which of the flags a parser takes: the output's (--json) only where the caller prints the report.
enum class ReportFlags { command, worker, gui };

void add_report_flags(CLI::App& cli, ReportOptions& options, ReportFlags which);

// The worker program's arguments that carry `options` (the flags above, as add_report_flags reads them back).
std::vector<std::string> worker_args(const ReportOptions& options);

}  // namespace us::app
