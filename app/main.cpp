// ultrascope: the desktop profiler and trainer. With no command it opens the GUI; the headless commands are
//   ultrascope run [-n RANKS] [training flags]   launch a run, stream it live, write its trace, print the report
//   ultrascope report TRACE [--json]              what a trace says, next to the predictions
//   ultrascope export TRACE --chrome OUT.json     for Perfetto / chrome://tracing
//   ultrascope predict [flags]                    the formulas for a configuration, without running it
#include <cstdio>
#include <cstring>
#include <string>

#include "app/cli/commands.h"
#include "engine/core/check.h"

namespace {

void usage() {
    std::printf(
        "usage: ultrascope <command> [args]\n"
        "  run [-n RANKS] [ultrascope-train flags]   launch a run, watch it live, write its trace and report\n"
        "  report TRACE [--json]                     step breakdown, overlap, bubbles, memory, MFU\n"
        "  export TRACE --chrome OUT.json[.gz]       Chrome trace JSON for Perfetto and chrome://tracing\n"
        "  predict [model and parallel flags]        memory, FLOPs, communication and bubble predictions\n"
        "Each command takes --help.\n");
}

}  // namespace

int main(int argc, char** argv) {
    try {
        if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
            usage();
            return argc < 2 ? 2 : 0;
        }
        const std::string command = argv[1];
        if (command == "run") return us::app::run_command(argc - 1, argv + 1);
        if (command == "report") return us::app::report_command(argc - 1, argv + 1);
        if (command == "export") return us::app::export_command(argc - 1, argv + 1);
        if (command == "predict") return us::app::predict_command(argc - 1, argv + 1);
        std::fprintf(stderr, "ultrascope: unknown command '%s'\n", command.c_str());
        usage();
        return 2;
    } catch (const us::UserError& e) {
        std::fprintf(stderr, "ultrascope: error: %s\n", e.what());
        return 2;
    }
}
