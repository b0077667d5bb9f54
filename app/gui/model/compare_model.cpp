#include "app/gui/model/compare_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>

#include "profiler/diff/memory_peaks.h"

#include "common/core/check.h"
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
    s.memory_peaks = prof::memory_peaks_of(report);
    s.step_ms = report.throughput.step_s * 1e3;
    s.tokens_per_s = report.throughput.tokens_per_s;
    s.mfu = report.throughput.mfu;
    return s;
}

std::vector<DifferingSetting> differing_settings(const std::vector<RunSummary>& runs) {
    std::vector<std::optional<nlohmann::json>> read;  // each run's settings through the table; nullopt: unknown
    for (const RunSummary& r : runs) {
        read.emplace_back();
        if (!r.config.is_object() || r.config.empty()) continue;
        try {
            read.back() = settings_from_json(r.config, r.label + "'s settings").to_json();
        } catch (const UserError&) {  // settings this build cannot read: shown as unknown, not guessed
        }
    }
    std::vector<std::string> keys = {"preset"};
    for (const Setting& s : settings_schema())
        if (s.key != "data") keys.emplace_back(s.key);
    std::vector<DifferingSetting> out;
    for (const std::string& key : keys) {
        DifferingSetting d{key, {}};
        std::set<std::string> distinct;
        for (const auto& j : read) {
            const bool known = j && j->contains(key);
            d.values.push_back(!known ? "-" : (*j)[key].is_string() ? (*j)[key].get<std::string>() : (*j)[key].dump());
            if (known) distinct.insert(d.values.back());
        }
        if (distinct.size() > 1) out.push_back(std::move(d));
    }
    return out;
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
