// `ultrascope export TRACE --chrome OUT.json[.gz]`: Chrome trace event JSON for Perfetto and chrome://tracing.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "app/cli/commands.h"
#include "profiler/trace/chrome_export.h"

namespace us::app {

int export_command(int argc, char** argv) {
    CLI::App cli{"ultrascope export: convert a trace for other viewers"};
    std::string path, chrome;
    cli.add_option("trace", path, "Trace file (.ustrace)")->required();
    cli.add_option("--chrome", chrome, "Write Chrome trace event JSON here (.json, or .json.gz compressed)")->required();
    CLI11_PARSE(cli, argc, argv);
    prof::TraceStore store;
    for (const auto& w : prof::load_trace(path, store)) std::fprintf(stderr, "warning: %s\n", w.c_str());
    prof::export_chrome_trace(store, chrome);
    std::fprintf(stderr, "wrote %s: %zu spans from %d rank(s)\n", chrome.c_str(), store.span_count(),
                 int(store.ranks().size()));
    return 0;
}

}  // namespace us::app
