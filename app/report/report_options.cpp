#include "app/report/report_options.h"

#include "common/settings/above_zero.h"
#include "profiler/trace/trace_store.h"

namespace us::app {

size_t ReportOptions::store_cap_bytes() const {
    return store_cap_mib > 0 ? store_cap_mib << 20 : prof::TraceStoreOptions{}.max_bytes;
}

void add_report_flags(CLI::App& cli, ReportOptions& o, ReportFlags which) {
    if (which != ReportFlags::gui) cli.add_flag("--json", o.json, "Print the report as JSON (docs/report-schema.md)");
    cli.add_option("--microbatches", o.microbatches,
                   "Micro-batches per step of an imported pipelined run, for its (p - 1) / m bubble "
                   "(docs/report-schema.md)")
        ->check(above_zero());
    if (which == ReportFlags::gui) return;  // the GUI keeps its own store and planner; large runs by its rule
    cli.add_option("--cluster", o.cluster_file,
                   "Machine file for the planner's step time (from `ultrascope calibrate`; default ./machine.json "
                   "when present)");
    o.store_cap_mib = prof::TraceStoreOptions{}.max_bytes >> 20;
    cli.add_option("--store-cap-mib", o.store_cap_mib,
                   "Memory cap of the events kept for the analysis (docs/trace-format.md)")
        ->check(above_zero());
    cli.add_flag("--digests", o.digests_only,
                 "Report from the ranks' digests only (the default beyond 64 rank files; docs/blame.md)");
    cli.add_option("--rank", o.ranks, "Open these ranks whole (a large run's others stay digests)")->delimiter(',');
    cli.add_option("--threads", o.threads, "Workers digesting rank files (default: one per core)")->check(above_zero());
    cli.add_flag("--no-cache", o.no_cache, "Neither read nor write the digests kept beside the traces");
}

std::vector<std::string> worker_args(const ReportOptions& o) {
    std::vector<std::string> args = {"--store-cap-mib", std::to_string(o.store_cap_bytes() >> 20)};
    if (o.json) args.push_back("--json");
    if (!o.cluster_file.empty()) args.insert(args.end(), {"--cluster", o.cluster_file});
    if (o.microbatches > 0) args.insert(args.end(), {"--microbatches", std::to_string(o.microbatches)});
    if (o.digests_only) args.push_back("--digests");
    if (!o.ranks.empty()) {
        std::string list;
        for (int r : o.ranks) list += (list.empty() ? "" : ",") + std::to_string(r);
        args.insert(args.end(), {"--rank", list});
    }
    if (o.threads > 0) args.insert(args.end(), {"--threads", std::to_string(o.threads)});
    if (o.no_cache) args.push_back("--no-cache");
    return args;
}

}  // namespace us::app
