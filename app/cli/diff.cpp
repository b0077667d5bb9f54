// `ultrascope diff A B [--repeat A2|B2 ...] [--json]`: what made run B's step slower (or faster) than run A's, split
// into causes that add up to the difference (profiler/diff/run_diff.h, docs/diff.md). A and B are anything
// `ultrascope report` opens: our trace files, PyTorch profiler folders or files, large runs from their cached
// digests; each --repeat is another run of A's or of B's settings, whose step with that run's is the noise between
// runs. The JSON
// schema is docs/report-schema.md ("ultrascope diff").
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <system_error>

#include "app/cli/commands.h"
#include "app/cli/parse_flags.h"
#include "app/report/run_diff_report.h"
#include "common/core/check.h"

namespace us::app {

namespace {

bool same_file(const std::string& x, const std::string& y) {
    std::error_code ec;
    return std::filesystem::equivalent(x, y, ec) && !ec;
}

}  // namespace

int diff_command(int argc, char** argv) {
    CLI::App cli{"ultrascope diff: what changed between two runs, the step's difference split into its causes"};
    std::string a, b;
    std::vector<std::string> repeat_paths;
    bool json = false;
    cli.add_option("A", a, "The run to compare against: a .ustrace file, or a PyTorch profiler folder or file")
        ->required();
    cli.add_option("B", b, "The run compared: the same kinds")->required();
    cli.add_option("--repeat", repeat_paths,
                   "Another run of A's or of B's settings (may be given more than once): the noise is then how far "
                   "the machine moves between runs, not only within each")
        ->allow_extra_args(false);  // one path per --repeat, so that A and B after it stay positional
    cli.add_flag("--json", json, "Print JSON (docs/report-schema.md, \"ultrascope diff\")");
    US_PARSE_FLAGS(cli, argc, argv, "diff");
    const RunReport ra = load_diff_side(a, "A"), rb = load_diff_side(b, "B");
    std::vector<RunReport> repeats;
    for (const std::string& path : repeat_paths) {
        US_CHECK_INPUT(!same_file(path, a), "--repeat {}: that is A itself: give another run of A's settings", path);
        US_CHECK_INPUT(!same_file(path, b), "--repeat {}: that is B itself: give another run of B's settings", path);
        repeats.push_back(load_diff_side(path, "--repeat"));
    }
    std::vector<NamedReport> named;  // pointing into `repeats`, which no longer grows
    for (size_t i = 0; i < repeats.size(); ++i) named.push_back({repeat_paths[i], &repeats[i]});
    const prof::RunDiff d = diff_run_reports(ra, a, rb, b, named);
    std::printf("%s",
                json ? (prof::diff_json(d).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n").c_str()
                     : prof::format_diff(d).c_str());
    std::fflush(stdout);
    return 0;
}

}  // namespace us::app
