// build_report(): a trace's report in named steps: what the run was (its config, or a planner's shape), each rank's
// steps, memory, ops and prediction, then the figures across ranks (waits in collectives, context and expert
// balance, the pipeline's bubble, throughput and MFU) and where the run misses its prediction.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/core/memory_category.h"
#include "profiler/analysis/core_wait.h"
#include "profiler/analysis/imported_report.h"
#include "profiler/analysis/report.h"
#include "profiler/trace/chrome_export.h"
#include "profiler/transport/rank_metadata.h"

namespace us::prof {

namespace {

// The peak of the rank's device_reserved_bytes counter (CUPTI), or -1 without one.
int64_t device_reserved_peak(const TraceStore& store, const RankTrace& rt) {
    const uint32_t name = store.find_name(std::string(kDeviceReservedCounter));
    auto it = rt.counters.find(name);
    if (it == rt.counters.end() || it->second.empty()) return -1;
    double peak = 0;
    for (const CounterPoint& p : it->second) peak = std::max(peak, p.value);
    return int64_t(peak);
}

std::string rank_status(const RankTrace& rt) {
    if (rt.lost) return "lost: " + rt.lost_reason;
    if (!rt.ended) return "incomplete: no end of stream (still running, or stopped without finishing)";
    if (rt.clean) return "ok";
    return rt.end_reason.empty() ? "ended with an error" : "stopped: " + rt.end_reason;
}

// Per model layer, the rows the experts of ep rank `ep_rank` received over the uniform share (their share of the
// choices x ep): at the step whose rows summed over the layers were most (what the activations hold at the end of a
// forward), and each layer at its own most (what one block's backward holds). The engine gives ep rank j the
// experts j E/ep .. (j + 1) E/ep - 1; the counts are of the whole global batch, which every ep group samples alike.
struct ExpertLoads {
    std::vector<double> at_peak_step, each_layer_most;
};
ExpertLoads expert_loads_of(const ExpertRouting& routing, const predict::PredictInput& in, int ep_rank) {
    const int E = routing.experts, ep = std::max(1, in.parallel.ep), per = E / ep;
    if (E <= 0 || E % ep != 0) return {};
    std::map<int, std::vector<double>> by_step;  // step -> load per model layer
    for (const LayerRouting& l : routing.layers)
        for (size_t s = 0; s < l.steps.size() && s < l.choices.size(); ++s) {
            double all = 0, mine = 0;
            for (int x = 0; x < int(l.choices[s].size()); ++x) {
                all += l.choices[s][size_t(x)];
                if (x / per == ep_rank) mine += l.choices[s][size_t(x)];
            }
            std::vector<double>& load = by_step[l.steps[s]];
            load.resize(size_t(in.layers), 1.0);
            if (all > 0 && l.layer >= 0 && l.layer < in.layers) load[size_t(l.layer)] = mine / all * ep;
        }
    ExpertLoads out;
    double most_sum = -1;
    for (const auto& [step, load] : by_step) {
        out.each_layer_most.resize(load.size(), 0.0);
        for (size_t l = 0; l < load.size(); ++l) out.each_layer_most[l] = std::max(out.each_layer_most[l], load[l]);
        double sum = 0;
        for (double x : load) sum += x;
        if (sum > most_sum) most_sum = sum, out.at_peak_step = load;
    }
    return out;
}

// What the run was: its config and the prediction's input; for a planner's prediction of a model the engine does
// not run, no engine walk, but the layout the pipeline and parallelism figures need.
void describe_run(const TraceStore& store, Report& rep) {
    rep.world_size = store.world_size();
    const RankMetadata& meta = store.run_rank_metadata();
    rep.config = meta.settings.value_or(nlohmann::json::object());
    if (meta.predicted) rep.predicted = *meta.predicted;
    rep.imported = store.is_imported();
    rep.predict_input = predict::PredictInput::from_config(rep.config);
    if (rep.config.empty() && rep.predicted.contains("shape")) {
        const nlohmann::json& l = rep.predicted["shape"];
        predict::PredictInput& in = rep.predict_input;
        in.parallel.dp = l.value("dp", 1), in.parallel.tp = l.value("tp", 1), in.parallel.pp = l.value("pp", 1),
        in.parallel.cp = l.value("cp", 1);
        in.parallel.ep = l.value("ep", 1), in.parallel.sp = l.value("sp", false), in.parallel.zero = l.value("zero", 0);
        in.parallel.pp_schedule = parse_pipeline_schedule(l.value("pp_schedule", std::string("1f1b"))),
        in.parallel.pp_chunks = l.value("pp_chunks", 1);
        in.micro_batch = l.value("batch", int64_t(1)), in.grad_accum = l.value("grad_accum", int64_t(1));
        in.seq = l.value("seq", in.seq), in.layers = l.value("layers", in.layers);
    }
}

// Steps of every rank, in store order: pipeline bubbles are measured over each replica's pipeline window, where the
// waits in the embedding group's collective (matched across its ranks) count as idle.
std::vector<std::vector<StepBreakdown>> all_rank_steps(const TraceStore& store, const Report& rep,
                                                       const std::vector<RankDigest>& digests,
                                                       const CollectiveMatches& collectives) {
    std::vector<std::vector<StepBreakdown>> all_steps;
    std::vector<int> replica_of;
    for (int r : store.ranks()) {
        all_steps.push_back(analyze_steps(store, r));
        replica_of.push_back(store.rank(r)->info.coords.dp.value_or(0));
    }
    if (rep.predict_input.parallel.pp > 1)
        apply_pipeline_windows(all_steps, replica_of, rep.predict_input.parallel.pp_chunks,
                               wait_intervals(collectives, digests, int(GroupKind::embedding)));
    return all_steps;
}

// The rank's prediction: the engine's walk at its pipeline stage (under expert parallelism with the routing it
// measured); without the engine's config (a planner's prediction for another model) the schedule's figures only.
void predict_rank(const Report& rep, RankReport& rr) {
    predict::PredictInput in = rep.predict_input;
    in.stage = rr.coords.pp.value_or(0);
    in.parallel.tp = std::max(1, in.parallel.tp);
    if (!rep.config.empty()) {
        // Under expert parallelism the rows a rank's experts receive follow the router: the walk takes the
        // measured routing (the step whose rows were most), so its figure is like for like with the peak.
        if (in.parallel.ep > 1 && !rep.routing.empty()) {
            ExpertLoads loads = expert_loads_of(rep.routing, in, rr.coords.ep.value_or(0));
            rr.expert_load = std::move(loads.at_peak_step);
            rr.expert_load_most = std::move(loads.each_layer_most);
        }
        in.moe_expert_load = rr.expert_load;
        in.moe_expert_load_most = rr.expert_load_most;
        rr.predicted = predict::predict(in);
    } else if (in.parallel.pp > 1) {  // the schedule's figures only (they need no model shape)
        predict::PredictInput schedule_only;
        schedule_only.parallel.pp = in.parallel.pp, schedule_only.parallel.pp_schedule = in.parallel.pp_schedule,
        schedule_only.parallel.pp_chunks = in.parallel.pp_chunks;
        schedule_only.grad_accum = in.grad_accum, schedule_only.stage = in.stage;
        schedule_only.layers = int64_t(in.parallel.pp) * in.parallel.pp_chunks;
        try {
            const predict::Prediction p = predict::predict(schedule_only);
            rr.predicted.bubble_theory = p.bubble_theory, rr.predicted.bubble_simulated = p.bubble_simulated;
            rr.predicted.micro_batches_in_flight = p.micro_batches_in_flight;
        } catch (const std::exception&) {  // a schedule the engine cannot run: no schedule figures
        }
    }
}

// One rank's figures from its own trace, and its warnings (CUPTI's dropped records, GPU time it lacks, dropped
// events).
RankReport rank_report(const TraceStore& store, int r, std::vector<StepBreakdown> steps, Report& rep) {
    const RankTrace& rt = *store.rank(r);
    const RankMetadata& meta = rt.info;
    RankReport rr;
    rr.rank = r;
    rr.coords = meta.coords;
    rr.label = rank_label(rt);
    rr.host = store.is_prediction() ? "" : meta.host;  // a planner's ranks are on no machine
    rr.status = rank_status(rt);
    rr.steps = std::move(steps);
    const std::vector<StepBreakdown> steady = steady_steps(rr.steps);
    rr.steady = sum_steps(steady);
    rr.ops = op_table(store, r, steady);
    rr.memory = analyze_memory(rt);
    rr.process = analyze_process_memory(process_memory_timeline(store, rt));
    rr.process.named_untracked = meta.device_memory_parts;
    predict_rank(rep, rr);
    rr.memory_modelled_sum_peak = modelled_sum_of_peaks(rr.memory, rr.predicted.modelled_categories());
    rr.peak_gflops = meta.device_peak_gflops;
    rr.peak_source = meta.device_peak_source.empty() ? "unknown" : meta.device_peak_source;
    rr.dropped_events = rt.dropped_events;
    if (meta.clock) {
        rr.clock_offset_ns = meta.clock->offset_ns;
        rr.clock_uncertainty_ns = meta.clock->uncertainty_ns;
    }
    rr.device_reserved_peak = device_reserved_peak(store, rt);
    rr.runqueue_wait_s = runqueue_wait_s(steady);
    rr.worker_runqueue_wait_s = sum_over_steps_s(steady, &StepBreakdown::worker_core_wait_s);
    rr.thread_cpu_s = sum_over_steps_s(steady, &StepBreakdown::core_cpu_s);
    rr.worker_cpu_s = sum_over_steps_s(steady, &StepBreakdown::worker_cpu_s);
    rr.hta = hta_breakdown(store, r);
    if (meta.cupti) {
        rr.cupti = *meta.cupti;
        const auto dropped = rr.cupti.value("dropped_records", int64_t(0));
        if (dropped > 0)
            rep.warnings.push_back(
                fmt::format("rank {}: CUPTI dropped {} activity records (its buffers were full): "
                            "the GPU timeline misses kernels",
                            r, dropped));
    }
    if (meta.backend == "cuda" && !rt.has_device_spans()) {
        const nlohmann::json cupti = meta.cupti.value_or(nlohmann::json::object());
        rep.warnings.push_back(fmt::format(
            "rank {} ran on a GPU without kernel-level spans ({}): its compute and communication times are the "
            "engine's launch spans, not GPU time",
            r, cupti.value("status", std::string("no CUPTI collector in this build"))));
    }
    if (rt.dropped_events > 0)
        rep.warnings.push_back(
            fmt::format("rank {} dropped {} events (buffers full or listener unreachable): "
                        "figures for it are incomplete",
                        r, rt.dropped_events));
    return rr;
}

// Attention time across each cp group (ranks that differ only in cp): the worst group's slowest over fastest.
void context_balance(Report& rep) {
    std::map<std::string, std::vector<const RankReport*>> groups;
    for (const auto& rr : rep.ranks) {
        std::string key;
        for (GridDim dim : {GridDim::dp, GridDim::pp, GridDim::tp, GridDim::ep})
            key += std::to_string(rr.coords[dim].value_or(0)) + ",";
        groups[key].push_back(&rr);
    }
    for (const auto& [key, members] : groups) {
        const auto [lo, hi] = std::minmax_element(members.begin(), members.end(), [](auto* a, auto* b) {
            return a->steady.attention_s < b->steady.attention_s;
        });
        if ((*lo)->steady.attention_s <= 0) continue;
        const double ratio = (*hi)->steady.attention_s / (*lo)->steady.attention_s;
        if (ratio > rep.context.attention_max_over_min) {
            rep.context.attention_max_over_min = ratio;
            rep.context.slowest_rank = (*hi)->rank;
            rep.context.fastest_rank = (*lo)->rank;
        }
        const auto [flo, fhi] = std::minmax_element(members.begin(), members.end(), [](auto* a, auto* b) {
            return a->steady.attention_flops < b->steady.attention_flops;
        });
        if ((*flo)->steady.attention_flops > 0)
            rep.context.attention_flops_max_over_min =
                std::max(rep.context.attention_flops_max_over_min,
                         double((*fhi)->steady.attention_flops) / double((*flo)->steady.attention_flops));
    }
}

// Expert time across each ep group (ranks that differ only in their ep coordinate).
void expert_balance(Report& rep) {
    std::map<std::string, std::vector<const RankReport*>> groups;
    for (const auto& rr : rep.ranks) {
        std::string key;
        for (GridDim dim : {GridDim::pp, GridDim::tp, GridDim::cp})
            key += std::to_string(rr.coords[dim].value_or(0)) + ",";
        key += std::to_string(rr.coords.dp.value_or(0) / std::max(1, rep.predict_input.parallel.ep));
        groups[key].push_back(&rr);
    }
    for (const auto& [key, members] : groups) {
        if (members.size() < 2) continue;
        const auto [lo, hi] = std::minmax_element(
            members.begin(), members.end(), [](auto* a, auto* b) { return a->steady.experts_s < b->steady.experts_s; });
        if ((*lo)->steady.experts_s <= 0) continue;
        const double ratio = (*hi)->steady.experts_s / (*lo)->steady.experts_s;
        if (ratio > rep.expert_balance.experts_max_over_min) rep.expert_balance = {ratio, (*hi)->rank, (*lo)->rank};
    }
}

// The pipeline's bubble is its busiest stage's (the others wait for it).
void pipeline_bubble(Report& rep) {
    double most_busy = -1;
    for (const auto& rr : rep.ranks)
        if (rr.steady.compute_s > most_busy) {
            most_busy = rr.steady.compute_s;
            rep.pipeline.measured = rr.steady.bubble_fraction;
            rep.pipeline.theory = rr.predicted.bubble_theory;
            rep.pipeline.simulated = rr.predicted.bubble_simulated;
            rep.pipeline.busiest_rank = rr.rank;
        }
}

// Throughput from the steady steps: a step lasts as long as its slowest rank.
void throughput(const TraceStore& store, Report& rep) {
    std::map<int, std::vector<double>> step_walls;  // step -> wall per rank
    for (const auto& rr : rep.ranks)
        for (const auto& s : steady_steps(rr.steps)) step_walls[s.step].push_back(s.wall_s);
    Throughput& t = rep.throughput;
    double total = 0;
    for (const auto& [step, walls] : step_walls) {
        total += *std::max_element(walls.begin(), walls.end());
        ++t.steps_measured;
    }
    const ThroughputBasis basis = throughput_basis(store);
    t.model_flops_per_token = basis.flops_per_token;
    t.peak_flops_per_s = basis.peak_flops_per_s;
    if (t.steps_measured > 0 && total > 0) {
        t.step_s = total / t.steps_measured;
        t.tokens_per_s = basis.tokens_per_step / t.step_s;
        t.achieved_flops_per_s = t.tokens_per_s * t.model_flops_per_token;
    }
    for (const auto& rr : rep.ranks)
        if (std::find(t.peak_sources.begin(), t.peak_sources.end(), rr.peak_source) == t.peak_sources.end())
            t.peak_sources.push_back(rr.peak_source);
    t.mfu = t.peak_flops_per_s > 0 ? t.achieved_flops_per_s / t.peak_flops_per_s : 0;
}

}  // namespace

std::vector<GroupKind> reported_groups(const RankReport& r) {
    std::vector<GroupKind> groups;
    for (const GroupKindName& k : kGroupKinds) {
        const size_t g = size_t(k.kind);
        if (k.kind == GroupKind::dp || k.kind == GroupKind::pp || k.kind == GroupKind::tp ||
            r.steady.group_bytes[g] > 0 || r.predicted.comm_bytes[g] > 0)
            groups.push_back(k.kind);
    }
    return groups;
}

double per_steady_step(const RankReport& r, double total) {
    const size_t steps = steady_step_count(r.steps);
    return steps > 0 ? total / double(steps) : 0.0;
}

int64_t most_modelled_sum_of_peaks(const Report& report, const CategoryMask& modelled) {
    int64_t most = 0;
    for (const RankReport& r : report.ranks) most = std::max(most, modelled_sum_of_peaks(r.memory, modelled));
    return most;
}

ThroughputBasis throughput_basis(const TraceStore& store) {
    const RankMetadata& meta = store.run_rank_metadata();
    const predict::Prediction whole =
        predict::predict(predict::PredictInput::from_config(meta.settings.value_or(nlohmann::json::object())));
    ThroughputBasis b{double(whole.tokens_per_step), whole.flops_per_token, 0};
    for (int r : store.ranks()) b.peak_flops_per_s += store.rank(r)->info.device_peak_gflops * 1e9;
    if (store.is_prediction() && !store.ranks().empty() && meta.predicted) {
        const nlohmann::json& p = *meta.predicted;
        if (meta.tokens_per_step > 0) b.tokens_per_step = double(meta.tokens_per_step);
        b.flops_per_token = p.value("model_flops_per_token", b.flops_per_token);
        b.peak_flops_per_s = store.rank(store.ranks().front())->info.device_peak_gflops * 1e9 *
                             p.value("gpus", double(store.ranks().size()));
    }
    return b;
}

namespace {

// Each rank's groups: on how many hosts their ranks are (the engine's groups, from the grid; hosts from each rank's
// metadata), so that the report can say which collectives cross nodes.
void count_group_hosts(const TraceStore& store, Report& rep) {
    std::map<std::pair<int, std::string>, std::set<std::string>> hosts;  // (group, instance) -> hosts
    std::map<std::pair<int, std::string>, std::vector<int>> members;     // (group, instance) -> ranks, in order
    for (const RankReport& r : rep.ranks)
        for (int g = 0; g < kGroupCount; ++g)
            if (const std::string& host = store.rank(r.rank)->info.host; !host.empty()) {
                hosts[{g, engine_group_instance(r.coords, g)}].insert(host);
                members[{g, engine_group_instance(r.coords, g)}].push_back(r.rank);
            }
    for (RankReport& r : rep.ranks)
        for (int g = 0; g < kGroupCount; ++g) {
            const std::pair<int, std::string> key{g, engine_group_instance(r.coords, g)};
            if (const auto it = hosts.find(key); it != hosts.end()) r.group_hosts[size_t(g)] = int(it->second.size());
            // The ring's successor: the next rank of the group (in the grid's coordinates), the first after the last.
            const auto m = members.find(key);
            if (g == int(GroupKind::pp) || m == members.end() || m->second.size() < 2) continue;
            const std::vector<int>& ring = m->second;
            const size_t at = size_t(std::find(ring.begin(), ring.end(), r.rank) - ring.begin());
            if (at >= ring.size()) continue;
            const int next = ring[(at + 1) % ring.size()];
            r.ring_successor_across[size_t(g)] =
                store.rank(next)->info.host != store.rank(r.rank)->info.host ? int8_t(1) : int8_t(0);
        }
}

}  // namespace

Report build_report(const TraceStore& store, int microbatches) {
    Report rep;
    describe_run(store, rep);
    if (rep.predict_input.moe_experts > 0) rep.routing = analyze_expert_routing(store);
    // Across ranks from their digests, as for runs too large to hold (cross_rank.h); collectives matched first.
    std::vector<RankDigest> digests;
    for (int r : store.ranks()) digests.push_back(digest_without_steps(store, r));
    CollectiveMatches collectives = match_collectives(digests);
    std::vector<std::vector<StepBreakdown>> all_steps = all_rank_steps(store, rep, digests, collectives);
    size_t index = 0;
    for (int r : store.ranks()) rep.ranks.push_back(rank_report(store, r, std::move(all_steps[index++]), rep));
    for (size_t i = 0; i < rep.ranks.size(); ++i)  // the steps, op table and HTA figures worked out once, above
        add_step_figures(digests[i], rep.ranks[i].steps, rep.ranks[i].ops, rep.ranks[i].hta);
    rep.cross = cross_rank(std::move(digests), std::move(collectives), {.microbatches = microbatches});
    count_group_hosts(store, rep);
    if (rep.predict_input.parallel.cp > 1) context_balance(rep);
    if (rep.predict_input.moe_experts > 0) expert_balance(rep);
    if (rep.predict_input.parallel.pp > 1) pipeline_bubble(rep);
    if (store.spans_dropped_by_cap() > 0 || store.memory_events_dropped_by_cap() > 0)
        rep.warnings.push_back(fmt::format(
            "the trace store reached its cap of {} MiB at step {}: {} op spans and {} memory events after it were not "
            "kept in memory (figures from those steps lack them; the trace file has everything: raise the cap with "
            "--store-cap-mib to read it whole)",
            store.options().max_bytes >> 20, store.cap_reached_at_step(), store.spans_dropped_by_cap(),
            store.memory_events_dropped_by_cap()));
    throughput(store, rep);
    if (!rep.imported) rep.misses = find_misses(rep);  // an imported run has no prediction to miss
    if (rep.imported) rep.imported_section = imported_run_section(store, rep.cross.pipelines);
    if (rep.imported) warn_of_missing_ranks(store, rep.warnings);
    return rep;
}

double inter_node_bytes_formula(const Report& report) {
    double total = 0;
    for (const RankReport& r : report.ranks)
        for (const StepBreakdown& step : r.steps)
            for (size_t g = 0; g < size_t(kGroupCount); ++g)
                if (r.ring_successor_across[g] == 1) total += step.group_bytes[g];
    return total;
}

}  // namespace us::prof
