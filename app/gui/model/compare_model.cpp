#include "app/gui/model/compare_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/settings/settings_schema.h"

namespace us::gui {

RunSummary summarize_run(const prof::Report& report, const std::string& label, const std::string& trace_path,
                         double final_loss, bool keep_cross) {
    RunSummary s;
    s.label = label;
    s.trace_path = trace_path;
    s.config = report.config;
    s.final_loss = final_loss;
    s.status = "ok";
    double overlap_sum = 0;
    int with_comm = 0;
    for (const auto& r : report.ranks) {
        if (r.status != "ok") s.status = r.status;
        if (r.memory.total_peak > s.peak_total) {
            s.peak_total = r.memory.total_peak;
            s.peak_bytes = r.memory.peak;
        }
        if (r.steady.comm_s > 0) {
            overlap_sum += r.steady.overlap_pct;
            ++with_comm;
        }
    }
    s.overlap_pct = with_comm ? overlap_sum / with_comm : 0;
    if (keep_cross) s.cross = std::make_shared<const prof::CrossRank>(report.cross);
    for (const auto& r : report.ranks)
        for (size_t c = 0; c < kMemCategoryCount && !report.imported; ++c)
            if (r.memory.peak[c] > 0) {
                int64_t& peak = s.memory_peaks[std::string(kMemCategoryNames[c])];
                peak = std::max(peak, r.memory.peak[c]);
            }
    s.step_ms = report.throughput.step_s * 1e3;
    s.tokens_per_s = report.throughput.tokens_per_s;
    s.mfu = report.throughput.mfu;
    return s;
}

std::vector<std::string> differing_settings(const std::vector<RunSummary>& runs) {
    std::vector<std::string> keys;
    if (runs.size() < 2) return keys;
    for (auto it = runs.front().config.begin(); it != runs.front().config.end(); ++it) {
        if (it.key() == "data") continue;
        for (const auto& r : runs)
            if (!r.config.contains(it.key()) || r.config[it.key()] != *it) {
                keys.push_back(it.key());
                break;
            }
    }
    return keys;
}

// Read through the settings table: a key the JSON lacks is the table's default (TrainConfig's), not a second one here.
std::string describe_config(const nlohmann::json& json) {
    const TrainConfig c = settings_from_json(json, "the run's settings");
    const ParallelLayout& p = c.parallel;
    std::string s = fmt::format("dp {}", p.dp);
    if (p.pp > 1) s += fmt::format(" x pp {} ({})", p.pp, schedule_name(p.pp_schedule));
    if (p.tp > 1) s += fmt::format(" x tp {}{}", p.tp, p.sp ? " + sp" : "");
    if (p.cp > 1) s += fmt::format(" x cp {} ({}, {})", p.cp, cp_balance_name(p.cp_balance), cp_comm_name(p.cp_comm));
    s += fmt::format(", ZeRO-{}, {}", p.zero, precision_name(c.precision));
    if (c.grad_accum > 1) s += fmt::format(", {} micro-batches", c.grad_accum);
    if (c.recompute != Recompute::none) s += fmt::format(", recompute {}", recompute_name(c.recompute));
    if (p.dp > 1) {
        s += fmt::format(", bucket {} MiB", p.bucket_mb);
        if (!p.overlap) s += ", no overlap";
    }
    return s;
}

}  // namespace us::gui
