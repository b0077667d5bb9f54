// Two runs' reports diffed (profiler/diff/run_diff.h, docs/diff.md): what `ultrascope diff` prints and what a
// lesson's claims over two of its runs read ("run": "zero-1..zero-3"). Each side is anything make_run_report opens
// (our traces, PyTorch folders, large runs from their digests); the memory peaks come with runs held whole.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/report/run_report.h"
#include "profiler/diff/run_diff.h"

namespace us::app {

// The report of one side, `which` ("A", "B") naming it in a UserError (a missing or unreadable run).
RunReport load_diff_side(const std::string& path, const char* which);
struct NamedReport {
    std::string name;
    const RunReport* report = nullptr;
};

// B against A, with `repeats` (runs of A's settings again: the noise between runs); the reports must outlive
// nothing (the diff copies what it keeps).
prof::RunDiff diff_run_reports(const RunReport& a, const std::string& a_name, const RunReport& b,
                               const std::string& b_name, const std::vector<NamedReport>& repeats = {});
// The diff of two traces as `ultrascope diff --json` prints it. Throws UserError as load_diff_side does.
nlohmann::json diff_traces_json(const std::string& a_path, const std::string& b_path);

}  // namespace us::app
