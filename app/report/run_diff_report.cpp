// Two runs' reports diffed: the sides loaded as `ultrascope report` loads a run, their cross-rank facts and
// memory peaks handed to the diff (run_diff_report.h).
#include "app/report/run_diff_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "common/core/check.h"

namespace us::app {

namespace {

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

prof::DiffSide side_of(const RunReport& r, const std::string& name) {
    return {name, &cross_of(r), memory_peaks(r), r.run.settings ? *r.run.settings : nlohmann::json()};
}

}  // namespace

RunReport load_diff_side(const std::string& path, const char* which) {
    US_CHECK_INPUT(std::filesystem::exists(path),
                   "{} ({}): no such file or folder: name a trace, a PyTorch profiler folder or files", which, path);
    ReportOptions options;
    options.planner = false;  // the diff compares measurements; the planner's prediction is not read
    try {
        return make_run_report(ReportSource::of_files({path}), options);
    } catch (const UserError& e) {
        throw UserError(fmt::format("{} ({}): {}", which, path, e.what()));
    }
}

prof::RunDiff diff_run_reports(const RunReport& a, const std::string& a_name, const RunReport& b,
                               const std::string& b_name, const std::vector<NamedReport>& repeats) {
    std::vector<prof::DiffSide> sides;
    for (const NamedReport& r : repeats) sides.push_back(side_of(*r.report, r.name));
    return prof::diff_runs(side_of(a, a_name), side_of(b, b_name), sides);
}

nlohmann::json diff_traces_json(const std::string& a_path, const std::string& b_path) {
    const RunReport a = load_diff_side(a_path, "A"), b = load_diff_side(b_path, "B");
    return prof::diff_json(diff_run_reports(a, a_path, b, b_path));
}

}  // namespace us::app
