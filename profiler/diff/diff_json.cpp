// The diff as JSON (run_diff.h; docs/report-schema.md, "ultrascope diff --json").
#include <map>
#include <nlohmann/json.hpp>

#include "profiler/diff/run_diff.h"

namespace us::prof {

namespace {

template <typename T>
nlohmann::json optional_json(const std::optional<T>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json();
}

// {"mean_ms", "most_ms", "most_rank", "workers_mean_ms", "source": "measured"}; null where unknown.
nlohmann::json core_wait_json(const std::optional<RunDiff::CoreWait>& w) {
    if (!w) return nullptr;
    return {{"mean_ms", w->mean_ms},
            {"most_ms", w->most_ms},
            {"most_rank", w->most_rank},
            {"workers_mean_ms", w->workers_mean_ms >= 0 ? nlohmann::json(w->workers_mean_ms) : nlohmann::json()},
            {"share", w->share >= 0 ? nlohmann::json(w->share) : nlohmann::json()},
            {"most_cpu_ms", w->most_cpu_ms >= 0 ? nlohmann::json(w->most_cpu_ms) : nlohmann::json()},
            {"source", "measured"}};
}

nlohmann::json cause_json(const Cause& c) {
    nlohmann::json ops = nlohmann::json::array();
    for (const CauseOp& o : c.ops)
        ops.push_back({{"name", o.name}, {"match", o.match}, {"a_ms", o.a_ms}, {"b_ms", o.b_ms}});
    return {{"kind", kCauseKindNames[int(c.kind)]},
            {"what", c.what},
            {"ms", c.ms},
            {"source", c.source},
            {"evidence",
             {{"group", c.group.empty() ? nlohmann::json() : nlohmann::json(c.group)},
              {"rank", c.rank ? nlohmann::json(*c.rank) : nlohmann::json()},
              {"ops", ops},
              {"text", c.evidence}}}};
}

// The causes summed per kind and, within a kind, per what it names ("attention", "dp"), in seconds: the paths a
// lesson's claim reads ("by_cause_s.exposed_comm.dp"). Every kind has its total (0 without a cause), so that a claim
// can sum kinds; a "what" without a cause is absent.
nlohmann::json by_cause_seconds(const std::vector<Cause>& causes) {
    std::map<std::string, std::map<std::string, double>> sums;
    for (const char* kind : kCauseKindNames) sums[kind]["total"] = 0;
    for (const Cause& c : causes) {
        std::map<std::string, double>& kind = sums[kCauseKindNames[int(c.kind)]];
        kind["total"] += c.ms / 1e3;
        if (!c.what.empty()) kind[c.what] += c.ms / 1e3;
    }
    return nlohmann::json(sums);
}

// Per steady step, the ranks' mean; the collectives' bytes null where the trace does not say them.
nlohmann::json communication_json(const RunDiff::Communication& c) {
    return {{"ms", c.ms},
            {"hidden_ms", c.hidden_ms},
            {"collectives", c.collectives},
            {"sized_collectives", c.sized_collectives},
            {"bytes", c.bytes > 0 ? nlohmann::json(c.bytes) : nlohmann::json()}};
}

}  // namespace

nlohmann::json diff_json(const RunDiff& d) {
    nlohmann::json causes = nlohmann::json::array(), what = nlohmann::json::array(), memory = nlohmann::json::array(),
                   ranks = nlohmann::json::array();
    for (const Cause& c : d.causes) causes.push_back(cause_json(c));
    for (const WhatIf& w : d.what_if)
        what.push_back({{"name", w.name}, {"step_ms", w.step_ms}, {"source", "derived"}, {"basis", w.basis}});
    for (const MemoryRow& m : d.memory)
        memory.push_back(
            {{"category", m.category}, {"a_bytes", optional_json(m.a_bytes)}, {"b_bytes", optional_json(m.b_bytes)}});
    nlohmann::json repeats = nlohmann::json::array(), settings = nullptr;
    for (const RepeatRun& r : d.repeats)
        repeats.push_back({{"name", r.name}, {"step_ms", r.step_ms}, {"of", std::string(1, r.of)}});
    nlohmann::json work = nullptr;
    if (d.work)
        work = {{"a_tokens_per_step", d.work->a_tokens},
                {"b_tokens_per_step", d.work->b_tokens},
                {"a_tokens_per_s", d.work->a_tokens_per_s},
                {"b_tokens_per_s", d.work->b_tokens_per_s},
                {"source", "derived"}};
    if (d.settings) {
        settings = nlohmann::json::array();
        for (const SettingChange& c : *d.settings) settings.push_back({{"key", c.key}, {"a", c.a}, {"b", c.b}});
    }
    for (const RankDelta& r : d.ranks)
        ranks.push_back({{"a_rank", r.a_rank},
                         {"b_rank", r.b_rank},
                         {"label", r.label},
                         {"a_step_ms", r.a_step_ms},
                         {"b_step_ms", r.b_step_ms},
                         {"compute_ms", r.compute_ms},
                         {"exposed_ms", r.exposed_ms},
                         {"idle_ms", r.idle_ms}});
    return {{"a", {{"name", d.a_name}, {"ranks", d.a_ranks}, {"steady_steps", d.a_steps}}},
            {"b", {{"name", d.b_name}, {"ranks", d.b_ranks}, {"steady_steps", d.b_steps}}},
            {"a_step_ms", d.a_step_ms},
            {"b_step_ms", d.b_step_ms},
            {"delta_ms", d.delta_ms},
            {"settings_changed", settings},
            {"work", work},
            {"noise_ms", d.noise_ms},
            {"noise_within_ms", d.noise_within_ms},
            {"communication",
             {{"source", "measured"}, {"a", communication_json(d.a_comm)}, {"b", communication_json(d.b_comm)}}},
            {"a_core_wait", core_wait_json(d.a_core_wait)},
            {"b_core_wait", core_wait_json(d.b_core_wait)},
            {"a_oversubscribed", d.a_oversubscribed.empty() ? nlohmann::json() : nlohmann::json(d.a_oversubscribed)},
            {"b_oversubscribed", d.b_oversubscribed.empty() ? nlohmann::json() : nlohmann::json(d.b_oversubscribed)},
            {"noise_between_ms", optional_json(d.noise_between_ms)},
            {"noise_from", noise_words(d)},
            {"repeats", repeats},
            {"a_steps_ms", d.a_steps_ms},
            {"b_steps_ms", d.b_steps_ms},
            {"within_noise", d.within_noise},
            {"verdict", d.verdict},
            {"causes", causes},
            {"by_cause_s", by_cause_seconds(d.causes)},
            {"unexplained_ms", d.unexplained_ms},
            {"what_if", what},
            {"memory", memory},
            {"matched", {{"ranks_by", d.ranks_by}, {"a_only", d.a_only}, {"b_only", d.b_only}, {"notes", d.notes}}},
            {"ranks", ranks}};
}

}  // namespace us::prof
