#include "app/gui/model/compare_model.h"

#include <fmt/format.h>

#include <algorithm>

namespace us::gui {

RunSummary summarize_run(const prof::Report& report, const std::string& label, const std::string& trace_path,
                         double final_loss) {
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

std::string describe_config(const nlohmann::json& c) {
    std::string s = fmt::format("dp {}", c.value("dp", 1));
    if (c.value("pp", 1) > 1) s += fmt::format(" x pp {} ({})", c.value("pp", 1), c.value("pp_schedule", std::string("1f1b")));
    if (c.value("tp", 1) > 1) s += fmt::format(" x tp {}{}", c.value("tp", 1), c.value("sp", false) ? " + sp" : "");
    if (c.value("cp", 1) > 1)
        s += fmt::format(" x cp {} ({})", c.value("cp", 1), c.value("cp_balance", std::string("zigzag")));
    s += fmt::format(", ZeRO-{}, {}", c.value("zero", 0), c.value("precision", std::string("fp32")));
    if (c.value("grad_accum", 1) > 1) s += fmt::format(", {} micro-batches", c.value("grad_accum", 1));
    if (c.value("recompute", std::string("none")) != "none") s += ", recompute " + c.value("recompute", std::string());
    if (c.value("dp", 1) > 1) {
        s += fmt::format(", bucket {} MiB", c.value("bucket_mb", 1.0));
        if (!c.value("overlap", true)) s += ", no overlap";
    }
    return s;
}

}  // namespace us::gui
