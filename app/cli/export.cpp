// `ultrascope export TRACE --chrome OUT.json[.gz]`: Chrome trace event JSON for Perfetto and chrome://tracing.
// `ultrascope export TRACE --kineto DIR`: one Kineto (torch.profiler) JSON per rank, for Holistic Trace Analysis.
// `ultrascope export TRACE --memory-snapshot OUT.pickle`: the run's allocations as PyTorch memory snapshots, per rank,
// that pytorch.org/memory_viz opens.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "app/cli/commands.h"
#include "app/cli/parse_flags.h"
#include "common/core/check.h"
#include "profiler/import/run_files.h"
#include "profiler/trace/chrome_export.h"
#include "profiler/snapshot/snapshot_export.h"
#include "profiler/trace/kineto_export.h"

namespace us::app {

int export_command(int argc, char** argv) {
    CLI::App cli{"ultrascope export: convert a trace for other viewers"};
    std::string chrome, kineto, snapshot;
    std::vector<std::string> paths;
    bool plain_json = false;
    cli.add_option("trace", paths, "Trace: a .ustrace file, or PyTorch profiler (Kineto) .json(.gz) files or a folder")
        ->required();
    cli.add_option("--chrome", chrome, "Write Chrome trace event JSON here (.json, or .json.gz compressed)");
    cli.add_option("--kineto", kineto,
                   "Write one Kineto (torch.profiler) trace per rank into this folder (rank-R.pt.trace.json.gz), "
                   "for Holistic Trace Analysis and TensorBoard");
    cli.add_flag("--no-gzip", plain_json, "With --kineto: write .json files, not .json.gz");
    cli.add_option("--memory-snapshot", snapshot,
                   "Write the allocations as a PyTorch memory snapshot (.pickle; rank<N>_ prefixed per rank) for "
                   "pytorch.org/memory_viz");
    US_PARSE_FLAGS(cli, argc, argv, "export");
    US_CHECK_INPUT(!chrome.empty() || !kineto.empty() || !snapshot.empty(),
                   "say what to write: --chrome OUT.json[.gz], --kineto DIR and/or --memory-snapshot OUT.pickle");
    prof::TraceStore store;
    for (const auto& w : prof::load_run(paths, store)) std::fprintf(stderr, "warning: %s\n", w.c_str());
    // As the report refuses it: an empty export would replace a file with nothing, and say it wrote.
    US_CHECK_INPUT(store.rank_count() > 0,
                   "no rank's data in the trace (a run that ended before any rank sent anything): nothing to export");
    if (!chrome.empty()) {
        prof::export_chrome_trace(store, chrome);
        std::fprintf(stderr, "wrote %s: %zu spans from %d rank(s)\n", chrome.c_str(), store.span_count(),
                     int(store.ranks().size()));
    }
    if (!kineto.empty()) {
        const auto files = prof::export_kineto_traces(store, kineto, !plain_json);
        for (const auto& f : files) std::fprintf(stderr, "wrote %s\n", f.c_str());
    }
    if (!snapshot.empty())
        for (const auto& f : snap::export_memory_snapshots(store, snapshot))
            std::fprintf(stderr, "wrote %s\n", f.c_str());
    return 0;
}

}  // namespace us::app
