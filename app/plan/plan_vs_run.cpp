#include "app/plan/plan_vs_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "profiler/predict/layout.h"
#include "profiler/predict/model_desc.h"
#include "common/core/check.h"
#include "common/core/format.h"
#include "common/settings/settings_schema.h"

namespace us::plan {

namespace {

// The run's settings, read through the settings table (a key its config lacks is the table's default).
TrainConfig settings_of(const prof::Report& rep) { return settings_from_json(rep.config, "the run's settings"); }

predict::ModelDesc model_of(const prof::Report& rep) {
    const TrainConfig c = settings_of(rep);
    const GPTConfig& g = c.model;
    return predict::engine_model(rep.config.value("preset", std::string("engine-gpt")), g.vocab, g.hidden, g.layers,
                                 g.heads, g.seq, g.moe_experts, g.moe_topk, g.moe_every, c.moe_capacity_factor);
}

predict::Layout layout_of(const prof::Report& rep) { return predict::layout_from_config(settings_of(rep)); }

// The report's steady steps: all but step 1 when there are several.
std::vector<const prof::StepBreakdown*> steady_steps(const prof::RankReport& rr) {
    std::vector<const prof::StepBreakdown*> out;
    for (const prof::StepBreakdown& s : rr.steps)
        if (rr.steps.size() == 1 || s.step >= 2) out.push_back(&s);
    return out;
}

MeasuredPieces measure_rank(const prof::TraceStore& store, const prof::RankReport& rr) {
    MeasuredPieces m;
    m.rank = rr.rank;
    std::map<int, bool> steady;
    for (const prof::StepBreakdown* s : steady_steps(rr)) {
        steady[s->step] = true;
        m.compute_s += s->compute_s, m.comm_exposed_s += s->exposed_s, m.idle_s += s->idle_s, m.wall_s += s->wall_s;
        ++m.steps;
    }
    if (const prof::RankTrace* rt = store.rank(rr.rank))
        for (const prof::Span& s : rt->lanes[size_t(prof::Lane::compute)].spans()) {
            if (s.kind != prof::SpanKind::op || !steady.count(s.step)) continue;
            const double sec = double(s.duration()) * 1e-9;
            switch (s.op) {
                case prof::OpClass::gemm:
                    m.gemm_s += sec;
                    break;
                case prof::OpClass::attention:
                    m.attention_s += sec;
                    break;
                case prof::OpClass::optimizer:
                    m.optimizer_s += sec;
                    break;
                case prof::OpClass::norm:
                case prof::OpClass::activation:
                case prof::OpClass::embedding:
                case prof::OpClass::loss:
                    m.other_ops_s += sec;
                    break;
                default:
                    break;
            }
        }
    if (m.steps > 0)
        for (double* v : {&m.gemm_s, &m.attention_s, &m.other_ops_s, &m.optimizer_s, &m.compute_s, &m.comm_exposed_s,
                          &m.idle_s, &m.wall_s})
            *v /= m.steps;
    return m;
}

std::string secs(double s) { return fmt::format("{:.4f} s", s); }

// The nodes the run's ranks were on (their recorded hosts) laid over the machine file: one host prices every link on
// the host's own (a file calibrated with --nodes also holds the slower link between nodes, which that run never
// crossed); several hosts holding equal blocks of consecutive ranks become that many nodes of that size, so that a
// group spanning hosts is priced on the inter-node link. Says what it found; empty when the hosts are unrecorded.
std::string fit_cluster_to_run_hosts(const prof::TraceStore& store, int world, predict::ClusterDesc& cl) {
    std::vector<std::string> host_of;  // by rank, in rank order
    for (int r : store.ranks()) host_of.push_back(store.rank(r)->info.host);
    if (host_of.empty() || int(host_of.size()) != world ||
        std::any_of(host_of.begin(), host_of.end(), [](const std::string& h) { return h.empty(); }))
        return "";
    std::vector<std::string> distinct = host_of;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    const int hosts = int(distinct.size());
    if (hosts == 1) {
        cl.inter_node = cl.intra_node;
        cl.inter_node_bucket_bandwidth = 0;
        cl.inter_node_overlap_slowdown = -1;
        return fmt::format("1 host ({}): every link priced as the host's own", host_of.front());
    }
    const int per_host = world / hosts;
    bool block = world % hosts == 0;
    for (int r = 0; block && r < world; ++r) block = host_of[size_t(r)] == host_of[size_t(r - r % per_host)];
    bool cyclic = !block && world % hosts == 0;
    for (int r = 0; cyclic && r < world; ++r) cyclic = host_of[size_t(r)] == host_of[size_t(r % hosts)];
    if (!block && !cyclic)
        return fmt::format(
            "{} hosts, ranks neither in equal blocks of consecutive ranks nor cyclic: priced as the machine file's "
            "nodes of {} ranks, laid out in blocks",
            hosts, cl.gpus_per_node);
    cl.placement = block ? "block" : "cyclic";
    cl.nodes = hosts;
    cl.gpus_per_node = per_host;
    return fmt::format("{} hosts, {} rank{} a host ({}): a group spanning hosts priced on the inter-node link", hosts,
                       per_host, per_host == 1 ? "" : "s", cl.placement);
}

}  // namespace

PlanVsRun compare_plan_with_run(const prof::TraceStore& store, const prof::Report& rep,
                                const std::optional<predict::ClusterDesc>& cluster, const std::string& cluster_source) {
    US_CHECK_INPUT(!rep.ranks.empty(), "the trace has no ranks to compare with the planner");
    PlanVsRun c;
    const predict::ModelDesc model = model_of(rep);
    predict::Layout layout = layout_of(rep);
    const ParallelLayout& p = layout.parallel;
    // Expert parallelism: the router's load the run measured replaces the assumed uniform routing. Each step and
    // MoE layer waits for its busiest ep rank (its experts' choices over the uniform share), so the load is that
    // rank's, step by step, averaged over the steady steps (all but the first when there are several) and layers.
    if (p.ep > 1 && !rep.routing.layers.empty() && rep.routing.experts % p.ep == 0) {
        const int per_rank = rep.routing.experts / p.ep;
        double sum = 0;
        int samples = 0;
        for (const prof::LayerRouting& lr : rep.routing.layers)
            for (size_t i = lr.choices.size() > 1 ? 1 : 0; i < lr.choices.size(); ++i) {
                const std::vector<double>& row = lr.choices[i];
                if (int(row.size()) != rep.routing.experts) continue;
                double total = 0, busiest = 0;
                for (double x : row) total += x;
                for (int k = 0; k < p.ep; ++k) {
                    double rows = 0;
                    for (int e = k * per_rank; e < (k + 1) * per_rank; ++e) rows += row[size_t(e)];
                    busiest = std::max(busiest, rows);
                }
                if (total > 0) sum += busiest / (total / p.ep), ++samples;
            }
        if (samples > 0) layout.moe_load = std::max(1.0, sum / samples);
    }
    predict::ClusterDesc cl = cluster ? *cluster : predict::load_cluster("h100-sxm");  // memory needs no calibration
    if (cluster)
        c.cluster_source = cluster_source;
    else
        c.no_cluster_note = cluster_source;
    c.hosts = fit_cluster_to_run_hosts(store, layout.world(), cl);
    // A run with more ranks than the machine file's cores spread over hosts of that size.
    if (cl.total_gpus() < layout.world()) cl.nodes = (layout.world() + cl.gpus_per_node - 1) / cl.gpus_per_node;
    c.plan = predict::evaluate(model, cl, layout);
    c.has_time = cluster.has_value();

    // Measured step: the least steady step (each as long as its slowest rank), and the report's mean.
    std::map<int, double> walls;
    for (const prof::RankReport& rr : rep.ranks)
        for (const prof::StepBreakdown* s : steady_steps(rr)) walls[s->step] = std::max(walls[s->step], s->wall_s);
    c.measured_best_step_s = walls.empty() ? 0 : 1e300;
    for (const auto& [step, w] : walls) c.measured_best_step_s = std::min(c.measured_best_step_s, w);
    c.measured_mean_step_s = rep.throughput.step_s;
    c.measured_tokens_per_s = rep.throughput.tokens_per_s;
    // Pieces: the rank with the most op time (the busiest; with a pipeline, the stage the others wait for).
    double most = -1;
    for (const prof::RankReport& rr : rep.ranks) {
        const MeasuredPieces m = measure_rank(store, rr);
        if (m.compute_s > most) most = m.compute_s, c.measured = m;
    }
    // Memory: the planner's busiest stage, its rank with the largest measured total.
    int64_t largest = -1;
    for (const prof::RankReport& rr : rep.ranks) {
        if (rr.coords.pp.value_or(0) != c.plan.memory.stage) continue;
        const int64_t sum = prof::modelled_sum_of_peaks(rr.memory, c.plan.memory.modelled);
        if (sum > largest) {
            largest = sum, c.memory_rank = rr.rank;
            for (int i = 0; i < kMemCategoryCount; ++i) c.measured_memory[size_t(i)] = rr.memory.peak[size_t(i)];
            c.at_measured_routing_bytes = -1;
            if (!rr.expert_load.empty()) {
                c.at_measured_routing_bytes = 0;
                for (int i = 0; i < kMemCategoryCount; ++i)
                    if (c.plan.memory.modelled[size_t(i)])
                        c.at_measured_routing_bytes += rr.predicted.memory[size_t(i)].value_or(0);
            }
        }
    }
    return c;
}

nlohmann::json plan_vs_run_json(const PlanVsRun& c) {
    const predict::PlanResult& r = c.plan;
    nlohmann::json j = {{"layout", r.layout.flags()}, {"describe", r.layout.describe()}};
    if (r.layout.parallel.ep > 1)
        j["moe_load"] = {{"value", r.layout.moe_load_or_uniform()},
                         {"kind", r.layout.moe_load > 0 ? "measured (the run's router)" : "assumed uniform"}};
    j["cluster"] = c.cluster_source.empty() ? nlohmann::json() : nlohmann::json(c.cluster_source);
    if (!c.no_cluster_note.empty()) j["no_cluster"] = c.no_cluster_note;
    j["hosts"] = c.hosts.empty() ? nlohmann::json() : nlohmann::json(c.hosts);
    nlohmann::json mem = nlohmann::json::object();
    for (int i = 0; i < kMemCategoryCount; ++i) {
        if (!r.memory.modelled[size_t(i)]) continue;
        mem[std::string(kMemCategoryNames[size_t(i)])] = {{"predicted", r.memory.bytes[size_t(i)]},
                                                          {"measured", c.measured_memory[size_t(i)]}};
    }
    int64_t measured_sum = 0;
    for (int i = 0; i < kMemCategoryCount; ++i)
        if (r.memory.modelled[size_t(i)]) measured_sum += c.measured_memory[size_t(i)];
    j["memory"] = {{"kind", r.memory.kind},
                   {"stage", r.memory.stage},
                   {"measured_rank", c.memory_rank},
                   {"bytes", mem},
                   {"modelled_sum_predicted_bytes", r.memory.categories_total()},
                   {"modelled_sum_measured_bytes", measured_sum}};
    if (c.at_measured_routing_bytes >= 0)
        j["memory"]["modelled_sum_at_measured_routing_bytes"] = c.at_measured_routing_bytes;
    if (!c.has_time) return j;
    const predict::StepPieces& t = r.time;
    const MeasuredPieces& m = c.measured;
    j["time_kind"] = "model (calibrated costs)";
    j["step_time_s"] = {
        {"model", t.step_s}, {"measured_best", c.measured_best_step_s}, {"measured_mean", c.measured_mean_step_s}};
    j["tokens_per_s"] = {
        {"derived", r.tokens_per_s},
        {"measured_mean", c.measured_tokens_per_s},
        {"measured_best", c.measured_best_step_s > 0 ? r.tokens_per_step / c.measured_best_step_s : 0.0}};
    j["measured_rank"] = m.rank;
    j["measured_steps"] = m.steps;
    // Like for like: recomputed ops are spans of their classes in the trace, so the model's recomputation is
    // compared inside "ops"; exposed communication of every group together; idle holds the bubble and transfers.
    j["pieces_s"] = {
        {"gemm", {{"model", t.gemm_s}, {"measured", m.gemm_s}}},
        {"attention", {{"model", t.attention_s}, {"measured", m.attention_s}}},
        {"other_ops", {{"model", t.other_ops_s}, {"measured", m.other_ops_s}}},
        {"recompute", {{"model", t.recompute_s}, {"measured", nullptr}}},
        {"overlap_slowdown", {{"model", t.overlap_slowdown_s}, {"measured", nullptr}}},
        {"optimizer", {{"model", t.optimizer_s}, {"measured", m.optimizer_s}}},
        {"ops_total",
         {{"model", t.gemm_s + t.attention_s + t.other_ops_s + t.recompute_s + t.overlap_slowdown_s + t.optimizer_s},
          {"measured", m.compute_s}}},
        {"comm_exposed",
         {{"model", t.tp_comm_s + t.cp_comm_exposed_s + t.ep_comm_s + t.dp_comm_exposed_s},
          {"measured", m.comm_exposed_s}}},
        {"idle", {{"model", t.bubble_s + t.pp_comm_s}, {"measured", m.idle_s}}},
        {"wall", {{"model", t.step_s}, {"measured", m.wall_s}}}};
    return j;
}

std::string format_plan_vs_run(const PlanVsRun& c) {
    const predict::PlanResult& r = c.plan;
    std::string s = fmt::format("\nPlanner (ultrascope plan {}):\n", r.layout.flags());
    if (c.has_time) {
        const predict::StepPieces& t = r.time;
        const MeasuredPieces& m = c.measured;
        s += fmt::format("  cluster {} (time: model with its measured costs)\n", c.cluster_source);
        if (!c.hosts.empty()) s += fmt::format("  nodes from the run: {}\n", c.hosts);
        auto pct = [](double model, double measured) {
            return measured > 0 ? fmt::format("{:+.1f}%", 100 * (model / measured - 1)) : std::string("");
        };
        s += fmt::format("  {:<38} {:>12} {:>12} {:>8}\n", "step time", "model", "measured", "error");
        s += fmt::format("  {:<38} {:>12} {:>12} {:>8}\n", "  best steady step (slowest rank)", secs(t.step_s),
                         secs(c.measured_best_step_s), pct(t.step_s, c.measured_best_step_s));
        s += fmt::format("  {:<38} {:>12} {:>12} {:>8}\n", "  mean steady step", secs(t.step_s),
                         secs(c.measured_mean_step_s), pct(t.step_s, c.measured_mean_step_s));
        s += fmt::format("  per step, rank {} (most op time; measured: mean of {} steady steps):\n", m.rank, m.steps);
        auto row = [&](const char* what, double model, double measured) {
            s += fmt::format("  {:<38} {:>12} {:>12} {:>8}\n", what, secs(model), secs(measured), pct(model, measured));
        };
        row("  GEMMs", t.gemm_s, m.gemm_s);
        row("  attention core", t.attention_s, m.attention_s);
        row("  other ops (norms, element-wise, loss)", t.other_ops_s, m.other_ops_s);
        if (t.recompute_s > 0)
            s += fmt::format("  {:<38} {:>12} {:>12}\n", "  recomputation", secs(t.recompute_s), "(in the above)");
        if (t.overlap_slowdown_s > 0)
            s += fmt::format("  {:<38} {:>12} {:>12}\n", "  slowed by hidden transfers", secs(t.overlap_slowdown_s),
                             "(in the ops)");
        row("  optimizer", t.optimizer_s, m.optimizer_s);
        row("  all ops",
            t.gemm_s + t.attention_s + t.other_ops_s + t.recompute_s + t.overlap_slowdown_s + t.optimizer_s,
            m.compute_s);
        row("  exposed communication", t.tp_comm_s + t.cp_comm_exposed_s + t.ep_comm_s + t.dp_comm_exposed_s,
            m.comm_exposed_s);
        row("  idle (bubble, pipeline transfers)", t.bubble_s + t.pp_comm_s, m.idle_s);
        row("  wall", t.step_s, m.wall_s);
        s += fmt::format("  {:<38} {:>12.4g} {:>12.4g} {:>8}   (derived from the model / measured mean)\n", "tokens/s",
                         r.tokens_per_s, c.measured_tokens_per_s, pct(r.tokens_per_s, c.measured_tokens_per_s));
    } else {
        s += fmt::format("  step time not compared: {}\n", c.no_cluster_note);
    }
    s += fmt::format("  memory, busiest rank (stage {}; measured rank {}), {} vs measured peak:\n", r.memory.stage,
                     c.memory_rank, r.memory.kind);
    int64_t ps = 0, ms = 0;
    for (int i = 0; i < kMemCategoryCount; ++i) {
        if (!r.memory.modelled[size_t(i)]) continue;
        const int64_t p = r.memory.bytes[size_t(i)], m = c.measured_memory[size_t(i)];
        ps += p, ms += m;
        s += fmt::format("  {:<38} {:>12} {:>12}\n", fmt::format("  {}", kMemCategoryNames[size_t(i)]), format_bytes(p),
                         format_bytes(m));
    }
    s += fmt::format("  {:<38} {:>12} {:>12} {:>8}\n", "  modelled categories", format_bytes(ps), format_bytes(ms),
                     ms > 0 ? fmt::format("{:+.2f}%", 100.0 * (double(ps) / double(ms) - 1)) : "");
    if (c.at_measured_routing_bytes >= 0)
        s += fmt::format(
            "  {:<38} {:>12} {:>12} {:>8}\n", "  with the routing measured (engine walk)",
            format_bytes(c.at_measured_routing_bytes), format_bytes(ms),
            ms > 0 ? fmt::format("{:+.2f}%", 100.0 * (double(c.at_measured_routing_bytes) / double(ms) - 1)) : "");
    return s;
}

}  // namespace us::plan
