// Two runs' reports diffed: the sides loaded as `ultrascope report` loads a run, their cross-rank facts and
// memory peaks handed to the diff (run_diff_report.h).
#include "app/report/run_diff_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "common/core/check.h"
#include "profiler/diff/memory_peaks.h"

namespace us::app {

namespace {

const prof::CrossRank& cross_of(const RunReport& r) { return r.whole ? r.whole->cross : r.digests->cross; }

// The memory peaks of a run held whole (a run reported from its digests has none: unknown).
std::map<std::string, int64_t> memory_peaks(const RunReport& r) {
    return r.whole ? prof::memory_peaks_of(*r.whole) : std::map<std::string, int64_t>{};
}

prof::DiffSide side_of(const RunReport& r, const std::string& name) {
    return {name, &cross_of(r), memory_peaks(r), r.run.settings ? *r.run.settings : nlohmann::json()};
}

// What the reader said of a side's files (a truncated trace, a rank cut off), for a refusal to say beside it.
std::vector<std::string> reader_warnings(const RunReport& r) {
    if (r.whole) return r.whole->warnings;
    std::vector<std::string> out = r.digests->run.warnings;
    out.insert(out.end(), r.digests->run.errors.begin(), r.digests->run.errors.end());
    return out;
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
    try {
        return prof::diff_runs(side_of(a, a_name), side_of(b, b_name), sides);
    } catch (const UserError& e) {  // a side without a steady step: its reader may have said why (a truncation)
        std::string said;
        for (const auto& [r, name] : {std::pair{&a, a_name}, std::pair{&b, b_name}})
            for (const std::string& w : reader_warnings(*r))
                said += fmt::format("{}{}: {}", said.empty() ? "" : "; ", name, w);
        if (said.empty()) throw;
        throw UserError(fmt::format("{} (the reader said of {})", e.what(), said));
    }
}

nlohmann::json diff_traces_json(const std::string& a_path, const std::string& b_path) {
    const RunReport a = load_diff_side(a_path, "A"), b = load_diff_side(b_path, "B");
    return prof::diff_json(diff_run_reports(a, a_path, b, b_path));
}

}  // namespace us::app
