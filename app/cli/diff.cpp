// `ultrascope diff A B [--json]`: what made run B's step slower (or faster) than run A's, split into causes that add
// up to the difference (profiler/diff/run_diff.h, docs/diff.md). A and B are anything `ultrascope report` opens: our
// trace files, PyTorch profiler folders or files, large runs from their cached digests. The JSON schema is
// docs/report-schema.md ("ultrascope diff").
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "app/cli/commands.h"
#include "app/report/run_diff_report.h"

namespace us::app {

int diff_command(int argc, char** argv) {
    CLI::App cli{"ultrascope diff: what changed between two runs, the step's difference split into its causes"};
    std::string a, b;
    bool json = false;
    cli.add_option("A", a, "The run to compare against: a .ustrace file, or a PyTorch profiler folder or file")
        ->required();
    cli.add_option("B", b, "The run compared: the same kinds")->required();
    cli.add_flag("--json", json, "Print JSON (docs/report-schema.md, \"ultrascope diff\")");
    CLI11_PARSE(cli, argc, argv);
    const RunReport ra = load_diff_side(a, "A"), rb = load_diff_side(b, "B");
    const prof::RunDiff d = diff_run_reports(ra, a, rb, b);
    std::printf("%s",
                json ? (prof::diff_json(d).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n").c_str()
                     : prof::format_diff(d).c_str());
    std::fflush(stdout);
    return 0;
}

}  // namespace us::app
