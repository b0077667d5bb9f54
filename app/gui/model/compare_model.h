// Runs kept in the session, side by side: what settings differ, and the figures a user compares (peak memory,
// step time, overlap, tokens/s, MFU). A summary is taken from a run's report when it ends (or is stopped).
#pragma once

#include <array>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/core/memory_category.h"
#include "profiler/analysis/report.h"

namespace us::gui {

struct RunSummary {
    std::string label;  // "run 3: dp 2, ZeRO-1, bucket 1 MiB"
    std::string trace_path;
    std::string status;
    nlohmann::json config;
    std::array<int64_t, kMemCategoryCount> peak_bytes{};  // the largest rank's measured peaks
    int64_t peak_total = 0;
    double step_ms = 0, overlap_pct = 0, tokens_per_s = 0, mfu = 0, final_loss = 0;
    // What the diff of two kept runs reads (diff_waterfall.h): the run's cross-rank facts (its digests: small for
    // a session's runs) and its largest peak per memory category.
    std::shared_ptr<const prof::CrossRank> cross;
    std::map<std::string, int64_t> memory_peaks;
};

// keep_cross: hold a copy of the run's cross-rank facts for the diff (an archived run; not the live row, made each
// frame).
RunSummary summarize_run(const prof::Report& report, const std::string& label, const std::string& trace_path,
                         double final_loss, bool keep_cross = true);
// A setting whose value differs between the runs, and each run's value ("-" where the run's settings are unknown:
// an imported trace).
struct DifferingSetting {
    std::string key;
    std::vector<std::string> values;  // one per run, in order
};
// Each run's settings read through the settings table (a key a run's version did not write is its default, as the
// diff's setting_changes reads them), the preset first, then the table's order; the data file's path left out.
std::vector<DifferingSetting> differing_settings(const std::vector<RunSummary>& runs);
// A short description of a configuration: "dp 2, ZeRO-1, bf16, bucket 1 MiB, recompute selective".
std::string describe_config(const nlohmann::json& config);

}  // namespace us::gui
