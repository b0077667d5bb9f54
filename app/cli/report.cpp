// `ultrascope report TRACE [--json]`: the step breakdown per rank, overlap, idle, bubbles, memory peaks measured
// against predicted, throughput and MFU. The JSON schema is docs/report-schema.md.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "app/cli/commands.h"
#include "engine/core/check.h"
#include "profiler/analysis/report.h"

namespace us::app {

int report_command(int argc, char** argv) {
    CLI::App cli{"ultrascope report: what a trace says, next to what the formulas predict"};
    std::string path;
    bool json = false;
    cli.add_option("trace", path, "Trace file (.ustrace)")->required();
    cli.add_flag("--json", json, "Print the report as JSON (docs/report-schema.md)");
    size_t cap_mib = prof::TraceStoreOptions{}.max_bytes >> 20;
    cli.add_option("--store-cap-mib", cap_mib, "Memory cap of the events kept for the analysis (docs/trace-format.md)")
        ->check(CLI::PositiveNumber);
    CLI11_PARSE(cli, argc, argv);
    prof::TraceStore store(prof::TraceStoreOptions{cap_mib << 20});
    const auto warnings = prof::load_trace(path, store);
    prof::Report rep = prof::build_report(store);
    rep.warnings.insert(rep.warnings.begin(), warnings.begin(), warnings.end());
    if (json) std::printf("%s\n", prof::report_json(rep).dump(2).c_str());
    else std::printf("Trace %s\n%s", path.c_str(), prof::format_report(rep).c_str());
    return 0;
}

}  // namespace us::app
