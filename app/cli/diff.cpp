// `ultrascope diff A B [--json]`: what made run B's step slower (or faster) than run A's, split into causes that add
// up to the difference (profiler/diff/run_diff.h, docs/diff.md). A and B are anything `ultrascope report` opens: our
// trace files, PyTorch profiler folders or files, large runs from their cached digests. The JSON schema is
// docs/report-schema.md ("ultrascope diff").
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "app/cli/commands.h"
#include "app/report/run_report.h"
#include "common/core/check.h"
#include "profiler/diff/run_diff.h"

namespace us::app {

namespace {

// The run's report, held for its cross-rank facts (and, held whole, its memory peaks).
RunReport load_side(const std::string& path, const ReportOptions& options, const char* which) {
    US_CHECK_INPUT(std::filesystem::exists(path),
                   "{} ({}): no such file or folder: name a trace, a PyTorch "
                   "profiler folder or files",
                   which, path);
    try {
        return make_run_report(ReportSource::of_files({path}), options);
    } catch (const UserError& e) {
        throw UserError(fmt::format("{} ({}): {}", which, path, e.what()));
    }
}

const prof::CrossRank& cross_of(const RunReport& r) { return r.whole ? r.whole->cross : r.digests->cross; }

// The largest peak of each memory category over the run's ranks, where the run was held whole and traced them.
std::map<std::string, int64_t> memory_peaks(const RunReport& r) {
    std::map<std::string, int64_t> out;
    if (!r.whole || r.whole->imported) return out;
    for (const prof::RankReport& rank : r.whole->ranks)
        for (size_t c = 0; c < kMemCategoryCount; ++c)
            if (rank.memory.peak[c] > 0) {
                int64_t& peak = out[std::string(kMemCategoryNames[c])];
                peak = std::max(peak, rank.memory.peak[c]);
            }
    return out;
}

}  // namespace

int diff_command(int argc, char** argv) {
    CLI::App cli{"ultrascope diff: what changed between two runs, the step's difference split into its causes"};
    std::string a, b;
    bool json = false;
    cli.add_option("A", a, "The run to compare against: a .ustrace file, or a PyTorch profiler folder or file")
        ->required();
    cli.add_option("B", b, "The run compared: the same kinds")->required();
    cli.add_flag("--json", json, "Print JSON (docs/report-schema.md, \"ultrascope diff\")");
    CLI11_PARSE(cli, argc, argv);
    ReportOptions options;
    options.planner = false;
    const RunReport ra = load_side(a, options, "A"), rb = load_side(b, options, "B");
    const prof::RunDiff d = prof::diff_runs({a, &cross_of(ra), memory_peaks(ra)}, {b, &cross_of(rb), memory_peaks(rb)});
    std::printf("%s",
                json ? (prof::diff_json(d).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n").c_str()
                     : prof::format_diff(d).c_str());
    std::fflush(stdout);
    return 0;
}

}  // namespace us::app
