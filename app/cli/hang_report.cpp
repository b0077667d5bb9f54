// `ultrascope report DUMPS... [--json] [--threads N]`: what holds a hung job, from its ranks' Flight Recorder dumps
// (files, folders, globs; docs/hangs.md). Text: the verdict in one sentence first; JSON: {"hang": {...}}
// (docs/report-schema.md). Files that cannot be read are named and left out; the rest is analysed.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "app/cli/commands.h"
#include "app/cli/parse_flags.h"
#include "common/core/check.h"
#include "profiler/hang/hang_analysis.h"
#include "profiler/hang/hang_report.h"

namespace us::app {

int hang_report_command(int argc, char** argv) {
    CLI::App cli{"ultrascope report DUMPS: what holds a hung job, from its ranks' Flight Recorder dumps"};
    std::vector<std::string> paths;
    bool json = false;
    unsigned threads = 0;
    cli.add_option("dumps", paths, "Flight Recorder dumps: files (pickle or JSON, gzip or not), folders or globs")
        ->required();
    cli.add_flag("--json", json, "The analysis as JSON: {\"hang\": {...}} (docs/report-schema.md)");
    cli.add_option("--threads", threads, "Threads reading the dumps (default: every core)");
    US_PARSE_FLAGS(cli, argc, argv, "report");
    const hang::DumpSet set = hang::load_dumps(hang::find_dump_files(paths), threads);
    if (set.dumps.empty()) {
        std::string why;
        for (const std::string& p : set.left_out) why += "\n  " + p;
        throw UserError(
            fmt::format("report: none of the {} files could be read as a Flight Recorder dump:{}", set.files, why));
    }
    const hang::HangAnalysis analysis = hang::analyze_hang(set);
    if (json)
        std::printf("%s\n",
                    nlohmann::json{{"hang", hang::hang_json(analysis)}}
                        .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)  // a stack may hold any bytes
                        .c_str());
    else
        std::printf("%s", hang::format_hang(analysis).c_str());
    std::fflush(stdout);
    return 0;
}

}  // namespace us::app
