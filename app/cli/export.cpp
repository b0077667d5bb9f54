// `ultrascope export TRACE --chrome OUT.json[.gz]`: Chrome trace event JSON for Perfetto and chrome://tracing.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "app/cli/commands.h"
#include "profiler/import/run_files.h"
#include "profiler/trace/chrome_export.h"

namespace us::app {

int export_command(int argc, char** argv) {
    CLI::App cli{"ultrascope export: convert a trace for other viewers"};
    std::string chrome;
    std::vector<std::string> paths;
    cli.add_option("trace", paths, "Trace: a .ustrace file, or PyTorch profiler (Kineto) .json(.gz) files or a folder")->required();
    cli.add_option("--chrome", chrome, "Write Chrome trace event JSON here (.json, or .json.gz compressed)")->required();
    CLI11_PARSE(cli, argc, argv);
    prof::TraceStore store;
    for (const auto& w : prof::load_run(paths, store)) std::fprintf(stderr, "warning: %s\n", w.c_str());
    prof::export_chrome_trace(store, chrome);
    std::fprintf(stderr, "wrote %s: %zu spans from %d rank(s)\n", chrome.c_str(), store.span_count(),
                 int(store.ranks().size()));
    return 0;
}

}  // namespace us::app
