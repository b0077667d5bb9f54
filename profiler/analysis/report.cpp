#include "profiler/analysis/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "common/core/format.h"
#include "common/core/memory_category.h"
#include "profiler/analysis/collective_waits.h"
#include "profiler/trace/chrome_export.h"

namespace us::prof {

namespace {

int coord(const nlohmann::json& coords, const char* dim) {
    return coords.contains(dim) && coords[dim].is_number_integer() ? coords[dim].get<int>() : 0;
}

// The peak of the rank's device_reserved_bytes counter (CUPTI), or -1 without one.
int64_t device_reserved_peak(const TraceStore& store, const RankTrace& rt) {
    const uint32_t name = store.find_name(std::string(kDeviceReservedCounter));
    auto it = rt.counters.find(name);
    if (it == rt.counters.end() || it->second.empty()) return -1;
    double peak = 0;
    for (const CounterPoint& p : it->second) peak = std::max(peak, p.value);
    return int64_t(peak);
}

// The groups a rank's communication is reported for: the grid's dp, pp and tp always, others when they moved or
// were predicted to move bytes.
std::vector<int> reported_groups(const RankReport& r) {
    std::vector<int> groups;
    for (int g = 0; g < kGroupCount; ++g) {
        const std::string_view name = kGroupNames[g];
        if (name == "dp" || name == "pp" || name == "tp" || r.steady.group_bytes[size_t(g)] > 0 ||
            r.predicted.comm_bytes[size_t(g)] > 0)
            groups.push_back(g);
    }
    return groups;
}

// Bytes per steady step.
double per_step(const RankReport& r, double total) {
    const size_t steps = steady_step_count(r.steps);
    return steps > 0 ? total / double(steps) : 0.0;
}

// The measured peaks of the categories the prediction models, summed: like for like with Prediction::memory_total.
int64_t modelled_sum_peak(const RankReport& r) {
    int64_t sum = 0;
    for (int k = 0; k < kMemCategoryCount; ++k)
        if (r.predicted.memory[size_t(k)]) sum += r.memory.peak[size_t(k)];
    return sum;
}

std::string rank_status(const RankTrace& rt) {
    if (rt.lost) return "lost: " + rt.lost_reason;
    if (!rt.ended) return "incomplete: no end of stream (still running, or stopped without finishing)";
    if (rt.clean) return "ok";
    return rt.end_reason.empty() ? "ended with an error" : "stopped: " + rt.end_reason;
}

}  // namespace

// Per model layer, the rows the experts of ep rank `ep_rank` received over the uniform share (their share of the
// choices x ep): at the step whose rows summed over the layers were most (what the activations hold at the end of a
// forward), and each layer at its own most (what one block's backward holds). The engine gives ep rank j the
// experts j E/ep .. (j + 1) E/ep - 1; the counts are of the whole global batch, which every ep group samples alike.
struct ExpertLoads {
    std::vector<double> at_peak_step, each_layer_most;
};
ExpertLoads expert_loads_of(const ExpertRouting& routing, const PredictInput& in, int ep_rank) {
    const int E = routing.experts, ep = std::max(1, in.ep), per = E / ep;
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

ThroughputBasis throughput_basis(const TraceStore& store) {
    const nlohmann::json& meta = store.run_metadata();
    const Prediction whole = predict(PredictInput::from_config(meta.value("config", nlohmann::json::object())));
    ThroughputBasis b{double(whole.tokens_per_step), whole.flops_per_token, 0};
    for (int r : store.ranks()) b.peak_flops_per_s += store.rank(r)->metadata.value("device_peak_gflops", 0.0) * 1e9;
    if (store.is_prediction() && !store.ranks().empty()) {
        const nlohmann::json& p = meta["predicted"];
        b.tokens_per_step = meta.value("tokens_per_step", b.tokens_per_step);
        b.flops_per_token = p.value("model_flops_per_token", b.flops_per_token);
        b.peak_flops_per_s = store.rank(store.ranks().front())->metadata.value("device_peak_gflops", 0.0) * 1e9 *
                             p.value("gpus", double(store.ranks().size()));
    }
    return b;
}

Report build_report(const TraceStore& store, int microbatches) {
    Report rep;
    rep.world_size = store.world_size();
    const nlohmann::json& meta = store.run_metadata();
    rep.config = meta.value("config", nlohmann::json::object());
    if (meta.contains("predicted") && meta["predicted"].is_object()) rep.predicted = meta["predicted"];
    rep.imported = store.is_imported();
    rep.predict_input = PredictInput::from_config(rep.config);
    if (rep.config.empty() && rep.predicted.contains("shape")) {
        // A planner's prediction for a model the engine does not run: no engine walk, but the layout the
        // pipeline and parallelism figures need.
        const nlohmann::json& l = rep.predicted["shape"];
        PredictInput& in = rep.predict_input;
        in.dp = l.value("dp", 1), in.tp = l.value("tp", 1), in.pp = l.value("pp", 1), in.cp = l.value("cp", 1);
        in.ep = l.value("ep", 1), in.sp = l.value("sp", false), in.zero = l.value("zero", 0);
        in.pp_schedule = l.value("pp_schedule", std::string("1f1b")), in.pp_chunks = l.value("pp_chunks", 1);
        in.micro_batch = l.value("batch", int64_t(1)), in.grad_accum = l.value("grad_accum", int64_t(1));
        in.seq = l.value("seq", in.seq), in.layers = l.value("layers", in.layers);
    }
    if (rep.predict_input.moe_experts > 0) rep.routing = analyze_expert_routing(store);
    std::map<int, std::vector<double>> step_walls;  // step -> wall per rank
    // Steps of every rank first: pipeline bubbles are measured over each replica's pipeline window.
    std::vector<std::vector<StepBreakdown>> all_steps;
    std::vector<int> replica_of;
    for (int r : store.ranks()) {
        all_steps.push_back(analyze_steps(store, r));
        replica_of.push_back(coord(store.rank(r)->metadata.value("coords", nlohmann::json::object()), "dp"));
    }
    if (rep.predict_input.pp > 1)
        apply_pipeline_windows(all_steps, replica_of, rep.predict_input.pp_chunks,
                               collective_wait_intervals(store, group_index("embedding")));
    size_t index = 0;
    for (int r : store.ranks()) {
        const RankTrace& rt = *store.rank(r);
        RankReport rr;
        rr.rank = r;
        rr.coords = rt.metadata.value("coords", nlohmann::json::object());
        rr.label = rank_label(rt);
        rr.status = rank_status(rt);
        rr.steps = std::move(all_steps[index++]);
        const std::vector<StepBreakdown> steady = steady_steps(rr.steps);
        rr.steady = sum_steps(steady);
        rr.ops = op_table(store, r, steady);
        rr.memory = analyze_memory(rt);
        rr.process = analyze_process_memory(process_memory_timeline(store, rt));
        PredictInput in = rep.predict_input;
        in.stage = coord(rr.coords, "pp");
        in.tp = std::max(1, in.tp);
        // A trace without the engine's config (a planner's prediction for another model) has no engine walk.
        if (!rep.config.empty()) {
            // Under expert parallelism the rows a rank's experts receive follow the router: the walk takes the
            // measured routing (the step whose rows were most), so its figure is like for like with the peak.
            if (in.ep > 1 && !rep.routing.empty()) {
                ExpertLoads loads = expert_loads_of(rep.routing, in, coord(rr.coords, "ep"));
                rr.expert_load = std::move(loads.at_peak_step);
                rr.expert_load_most = std::move(loads.each_layer_most);
            }
            in.moe_expert_load = rr.expert_load;
            in.moe_expert_load_most = rr.expert_load_most;
            rr.predicted = predict(in);
        } else if (in.pp > 1) {  // the schedule's figures only (they need no model shape)
            PredictInput schedule_only;
            schedule_only.pp = in.pp, schedule_only.pp_schedule = in.pp_schedule, schedule_only.pp_chunks = in.pp_chunks;
            schedule_only.grad_accum = in.grad_accum, schedule_only.stage = in.stage;
            schedule_only.layers = int64_t(in.pp) * in.pp_chunks;
            try {
                const Prediction p = predict(schedule_only);
                rr.predicted.bubble_theory = p.bubble_theory, rr.predicted.bubble_simulated = p.bubble_simulated;
                rr.predicted.micro_batches_in_flight = p.micro_batches_in_flight;
            } catch (const std::exception&) {  // a schedule the engine cannot run: no schedule figures
            }
        }
        rr.peak_gflops = rt.metadata.value("device_peak_gflops", 0.0);
        rr.peak_source = rt.metadata.value("device_peak_source", std::string("unknown"));
        rr.dropped_events = rt.dropped_events;
        if (rt.metadata.contains("clock") && rt.metadata["clock"].is_object()) {
            rr.clock_offset_ns = rt.metadata["clock"].value("offset_ns", int64_t(0));
            rr.clock_uncertainty_ns = rt.metadata["clock"].value("uncertainty_ns", int64_t(0));
        }
        rr.device_reserved_peak = device_reserved_peak(store, rt);
        rr.hta = hta_breakdown(store, r);
        if (rt.metadata.contains("cupti") && rt.metadata["cupti"].is_object()) {
            rr.cupti = rt.metadata["cupti"];
            const auto dropped = rr.cupti.value("dropped_records", int64_t(0));
            if (dropped > 0)
                rep.warnings.push_back(fmt::format("rank {}: CUPTI dropped {} activity records (its buffers were full): "
                                                   "the GPU timeline misses kernels",
                                                   r, dropped));
        }
        for (const auto& s : steady_steps(rr.steps)) step_walls[s.step].push_back(s.wall_s);
        if (rt.metadata.value("backend", std::string()) == "cuda" && !rt.has_device_spans()) {
            const nlohmann::json cupti = rt.metadata.value("cupti", nlohmann::json::object());
            rep.warnings.push_back(fmt::format(
                "rank {} ran on a GPU without kernel-level spans ({}): its compute and communication times are the "
                "engine's launch spans, not GPU time",
                r, cupti.value("status", std::string("no CUPTI collector in this build"))));
        }
        if (rt.dropped_events > 0)
            rep.warnings.push_back(fmt::format("rank {} dropped {} events (buffers full or listener unreachable): "
                                               "figures for it are incomplete",
                                               r, rt.dropped_events));
        rep.ranks.push_back(std::move(rr));
    }
    // Waiting for peers inside collectives, matched across each group's ranks over the steady steps.
    int first_steady = 0;
    for (const auto& rr : rep.ranks)
        if (!rr.steps.empty()) first_steady = std::max(first_steady, steady_steps(rr.steps).front().step);
    const auto waits = collective_waits(store, first_steady);
    for (auto& rr : rep.ranks)
        if (auto it = waits.find(rr.rank); it != waits.end()) rr.group_wait_s = it->second;
    if (rep.predict_input.cp > 1) {  // attention time across each cp group (ranks that differ only in cp)
        std::map<std::string, std::vector<const RankReport*>> groups;
        for (const auto& rr : rep.ranks) {
            std::string key;
            for (const char* dim : {"dp", "pp", "tp", "ep"}) key += std::to_string(coord(rr.coords, dim)) + ",";
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
    if (rep.predict_input.moe_experts > 0) {
        // expert time across each ep group (ranks that differ only in their ep coordinate)
        std::map<std::string, std::vector<const RankReport*>> groups;
        for (const auto& rr : rep.ranks) {
            std::string key;
            for (const char* dim : {"pp", "tp", "cp"}) key += std::to_string(coord(rr.coords, dim)) + ",";
            key += std::to_string(coord(rr.coords, "dp") / std::max(1, rep.predict_input.ep));
            groups[key].push_back(&rr);
        }
        for (const auto& [key, members] : groups) {
            if (members.size() < 2) continue;
            const auto [lo, hi] = std::minmax_element(members.begin(), members.end(), [](auto* a, auto* b) {
                return a->steady.experts_s < b->steady.experts_s;
            });
            if ((*lo)->steady.experts_s <= 0) continue;
            const double ratio = (*hi)->steady.experts_s / (*lo)->steady.experts_s;
            if (ratio > rep.expert_balance.experts_max_over_min) rep.expert_balance = {ratio, (*hi)->rank, (*lo)->rank};
        }
    }
    if (rep.predict_input.pp > 1) {
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
    if (store.spans_dropped_by_cap() > 0 || store.memory_events_dropped_by_cap() > 0)
        rep.warnings.push_back(fmt::format(
            "the trace store reached its cap of {} MiB at step {}: {} op spans and {} memory events after it were not "
            "kept in memory (figures from those steps lack them; the trace file has everything: raise the cap with "
            "--store-cap-mib to read it whole)",
            store.options().max_bytes >> 20, store.cap_reached_at_step(), store.spans_dropped_by_cap(),
            store.memory_events_dropped_by_cap()));
    // Throughput from the steady steps: a step lasts as long as its slowest rank.
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
    if (!rep.imported) rep.misses = find_misses(rep);  // an imported run has no prediction to miss
    if (rep.imported) rep.imported_section = imported_run_section(store, microbatches);
    return rep;
}

namespace {

// The busiest rank's op table, its heaviest rows (the JSON has every row of every rank).
std::string format_op_table(const Report& rep) {
    const RankReport* busiest = nullptr;
    for (const auto& r : rep.ranks)
        if (!r.ops.rows.empty() && (!busiest || r.steady.compute_s > busiest->steady.compute_s)) busiest = &r;
    if (!busiest) return {};
    const OpTable& t = busiest->ops;
    constexpr size_t kShown = 14;
    std::string s = fmt::format("\nWhere the compute goes on {}{}, per steady step ({}, {} step(s); self time: nested "
                                "ops taken out; GFLOP/s from the FLOPs the op spans carry):\n",
                                busiest->label, rep.ranks.size() > 1 ? " (the busiest rank)" : "", rep.source(), t.steps);
    s += fmt::format("  {:<44} {:<10} {:>7} {:>10} {:>7} {:>10} {:>9}\n", t.device_kernels ? "GPU kernel" : "op", "class",
                     "calls", "ms", "% wall", "us/call", "GFLOP/s");
    bool causal_note = false;
    for (size_t i = 0; i < std::min(kShown, t.rows.size()); ++i) {
        const OpRow& r = t.rows[i];
        const double rate = OpTable::flop_rate(r);
        const std::string name = short_op_name(r.name, 44);
        s += fmt::format("  {:<44} {:<10} {:>7.1f} {:>10.3f} {:>6.1f}% {:>10.1f} {:>9}\n", name, kOpClassNames[size_t(r.op)],
                         double(r.calls) / t.steps, 1e3 * t.per_step(r.self_s), 100 * t.share_of_wall(r.self_s),
                         1e6 * r.per_call_s(),
                         rate > 0 ? fmt::format("{:.1f}{}", rate / 1e9, r.flops_count_whole_square() ? "*" : "")
                                  : std::string("-"));
        causal_note |= r.flops_count_whole_square();
    }
    if (t.rows.size() > kShown) {
        double rest = 0;
        for (size_t i = kShown; i < t.rows.size(); ++i) rest += t.rows[i].self_s;
        s += fmt::format("  {:<44} {:<10} {:>7} {:>10.3f} {:>6.1f}%\n", fmt::format("the other {} ops", t.rows.size() - kShown),
                         "", "", 1e3 * t.per_step(rest), 100 * t.share_of_wall(rest));
    }
    s += fmt::format("  all ops {:.3f} ms of a {:.3f} ms step ({:.1f}%); the rest is communication not under compute, "
                     "waiting and idle\n",
                     1e3 * t.per_step(t.self_s()), 1e3 * t.per_step(t.wall_s), 100 * t.share_of_wall(t.self_s()));
    if (causal_note)
        s += "  * attention FLOPs count the whole s x s square, as the 6N + 12*L*h*s formula does; a causal kernel "
             "computes about half of it, so its own rate is about half the figure\n";
    return s;
}

nlohmann::json op_table_json(const OpTable& t) {
    nlohmann::json rows = nlohmann::json::array();
    for (const OpRow& r : t.rows)
        rows.push_back({{"name", r.name},
                        {"class", kOpClassNames[size_t(r.op)]},
                        {"calls_per_step", double(r.calls) / t.steps},
                        {"self_s_per_step", t.per_step(r.self_s)},
                        {"total_s_per_step", t.per_step(r.total_s)},
                        {"longest_call_s", r.longest_s},
                        {"flops_per_step", double(r.flops) / t.steps},
                        {"flops_per_s", OpTable::flop_rate(r)}});
    return {{"steps", t.steps},
            {"wall_s_per_step", t.per_step(t.wall_s)},
            {"device_kernels", t.device_kernels},
            {"rows", rows}};
}

}  // namespace

std::string format_report(const Report& rep) {
    std::string s;
    const auto& c = rep.config;
    const char* src = rep.source();
    if (rep.is_predicted()) {
        const auto& p = rep.predicted;
        s += fmt::format("PREDICTED, not a run: the planner's model of {} on {} GPUs of {} ({}); {} rank(s) drawn, one per "
                         "pipeline stage: each is the stage's rank with tp, cp, dp and ep index 0. Every figure below "
                         "is the model's.\n",
                         p.value("model", std::string("?")), p.value("gpus", 0), p.value("cluster", std::string("?")),
                         p.value("layout", std::string("?")), rep.world_size);
    }
    if (!c.empty()) s += fmt::format("Run: {} rank(s); model h {} L {} heads {} seq {} vocab {}; micro-batch {} x {} micro-batches; {}; "
                     "ZeRO-{}; attention {}\n",
                     rep.world_size, c.value("hidden", 0), c.value("layers", 0), c.value("heads", 0), c.value("seq", 0),
                     c.value("vocab", 0), c.value("batch", 0), c.value("grad_accum", 0),
                     c.value("precision", std::string("?")), c.value("zero", 0),
                     c.value("attention", std::string("naive")));
    if (rep.predict_input.moe_experts > 0)
        s += fmt::format("  mixture of experts: every {} block(s) E {} experts, top-{}, ep {}; {} parameters, {} active "
                         "per token\n",
                         rep.predict_input.moe_every, rep.predict_input.moe_experts, rep.predict_input.moe_topk,
                         rep.predict_input.ep, predict(rep.predict_input).params,
                         predict(rep.predict_input).active_params);
    if (!rep.misses.empty()) {  // first: where the run and its prediction part
        s += '\n';
        s += format_misses(rep.misses);
    }
    const auto& t = rep.throughput;
    if (rep.imported)  // no model or batch in a PyTorch trace: the step time only
        s += fmt::format("\nThroughput ({} over {} steady step(s)): {:.1f} ms/step; tokens/s, model FLOPs and MFU unknown "
                         "for an imported run\n", src, t.steps_measured, t.step_s * 1e3);
    else {
    s += fmt::format("\nThroughput ({} over {} steady step(s)): {:.0f} tokens/s, {:.1f} ms/step\n", src, t.steps_measured,
                     t.tokens_per_s, t.step_s * 1e3);
    std::string sources;
    for (const std::string& src : t.peak_sources) sources += (sources.empty() ? "" : "; ") + src;
    s += fmt::format("  model FLOPs/token (formula, 6N + 12*L*h*s{}): {:.1f} M; achieved {:.1f} GFLOP/s (derived) of a "
                     "peak of {:.1f} GFLOP/s summed over the {}: MFU {:.1f}% (derived)\n  peak: {}\n",
                     rep.predict_input.moe_experts > 0 ? ", N active" : "", t.model_flops_per_token / 1e6,
                     t.achieved_flops_per_s / 1e9, t.peak_flops_per_s / 1e9,
                     rep.is_predicted() ? "plan's GPUs" : "ranks", 100 * t.mfu,
                     sources.empty() ? std::string("unknown") : sources);
    // The attention term counts every query against every key; causal kernels skip the masked half, so when the term
    // is a large share the MFU overstates what the hardware did. Say so where it matters (long sequences).
    const PredictInput& pi = rep.predict_input;
    const double attention_share =
        t.model_flops_per_token > 0 ? 12.0 * double(pi.layers) * double(pi.hidden) * double(pi.seq) / t.model_flops_per_token : 0;
    if (attention_share >= 0.1 && !rep.is_predicted())
        s += fmt::format("  attention's 12*L*h*s is {:.0f}% of those FLOPs (formula): it counts the whole s x s square, as PaLM's MFU "
                         "does; causal kernels skip about half of it, so the hardware did less than this MFU reads\n",
                         100 * attention_share);
    if (t.mfu > 1.0 && !rep.is_predicted())
        s += fmt::format("  the MFU is above 100%: the run did more FLOPs per second than the peak measured at its start "
                         "(that measurement was short and the machine shared, or the formula counts FLOPs the kernels "
                         "skipped); read it as near the peak, not beyond it\n");
    }
    if (rep.predict_input.pp > 1)
        s += fmt::format("Pipeline bubble ({} schedule, pp {}, {} micro-batches): {:.3f} {} on the busiest stage "
                         "(rank {}), {:.3f} by the formula, {:.3f} simulated\n",
                         rep.predict_input.pp_schedule, rep.predict_input.pp, rep.predict_input.grad_accum,
                         rep.pipeline.measured, src, rep.pipeline.busiest_rank, rep.pipeline.theory, rep.pipeline.simulated);
    if (rep.predict_input.cp > 1)
        s += fmt::format("Context parallelism (cp {}, {}): attention time per rank, slowest / fastest in a cp group "
                         "= {:.2f} (rank {} / rank {}, measured); attention FLOPs most / least {:.2f}\n",
                         rep.predict_input.cp, rep.predict_input.cp_balance, rep.context.attention_max_over_min,
                         rep.context.slowest_rank, rep.context.fastest_rank, rep.context.attention_flops_max_over_min);
    if (!rep.routing.empty()) {
        const ExpertRouting& ro = rep.routing;
        s += fmt::format("Experts (measured, choices of the global batch; E {}, top-{}{}):\n", ro.experts,
                         rep.predict_input.moe_topk,
                         rep.predict_input.moe_capacity_factor > 0
                             ? fmt::format(", capacity factor {:.2f}", rep.predict_input.moe_capacity_factor)
                             : std::string(", dropless"));
        for (const LayerRouting& l : ro.layers) {
            std::string shares;
            for (double x : l.share) shares += fmt::format("{}{:.0f}%", shares.empty() ? "" : " ", 100 * x);
            s += fmt::format("  layer {}: share per expert {} (even: {:.0f}% each); most loaded / mean {:.2f} (worst "
                             "step {:.2f}); dropped {:.1f}%\n",
                             l.layer, shares, 100.0 / std::max(1, ro.experts), l.imbalance_mean, l.imbalance_max,
                             100 * l.dropped_fraction);
        }
        if (!ro.balance.empty()) {
            double b = 0, a = 0;
            for (size_t i = 0; i < ro.balance.size(); ++i) b += ro.balance[i], a += ro.aux_loss[i];
            s += fmt::format("  balance E*sum(f*P) {:.3f} mean over {} step(s) (1 even, E on one expert); balance loss "
                             "added to the training loss {:.4f}\n",
                             b / double(ro.balance.size()), ro.balance.size(), a / double(ro.balance.size()));
        }
        if (rep.expert_balance.slowest_rank >= 0)
            s += fmt::format("  expert GEMM time per rank, slowest / fastest in an ep group = {:.2f} (rank {} / rank "
                             "{}): the others wait for the slowest in the next all-to-all (ep waiting below)\n",
                             rep.expert_balance.experts_max_over_min, rep.expert_balance.slowest_rank,
                             rep.expert_balance.fastest_rank);
    }
    bool clocks_estimated = false;
    for (const auto& r : rep.ranks) clocks_estimated |= r.clock_offset_ns != 0 || r.clock_uncertainty_ns != 0;
    if (clocks_estimated) {
        s += "\nClocks (measured: MPI ping-pong against rank 0; each rank's times are shifted by its offset):\n";
        for (const auto& r : rep.ranks)
            s += fmt::format("  {:<22} offset {:+.6f} ms +- {:.1f} us\n", r.label, double(r.clock_offset_ns) / 1e6,
                             double(r.clock_uncertainty_ns) / 1e3);
    }
    s += fmt::format("\nTime per rank, summed over the steady steps ({}):\n", src);
    s += fmt::format("  {:<22} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>15}\n", "rank", "wall s", "compute s", "overlap s",
                     "exposed s", "idle s", "overlap", "bubble (theory)");
    size_t worst = 0;
    for (size_t i = 0; i < rep.ranks.size(); ++i)
        if (rep.ranks[i].steady.idle_s + rep.ranks[i].steady.exposed_s >
            rep.ranks[worst].steady.idle_s + rep.ranks[worst].steady.exposed_s)
            worst = i;
    std::string traced;  // ranks whose C and M are the GPU's own record
    for (const auto& r : rep.ranks)
        if (r.steady.device_truth) traced += fmt::format("{}{}", traced.empty() ? "" : ", ", r.rank);
    for (size_t i = 0; i < rep.ranks.size(); ++i) {
        const auto& r = rep.ranks[i];
        const auto& b = r.steady;
        const std::string bubble = rep.predict_input.pp > 1
                                       ? fmt::format("{:>6.3f} ({:.3f})", b.bubble_fraction, r.predicted.bubble_theory)
                                       : fmt::format("{:>15}", "-");
        s += fmt::format("  {:<22} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>7.1f}% {}{}\n", r.label, b.wall_s,
                         b.compute_s, b.overlapped_s, b.exposed_s, b.idle_s, b.overlap_pct, bubble,
                         rep.ranks.size() > 1 && i == worst ? "  <- most idle + exposed" : "");
    }
    for (const auto& r : rep.ranks) {
        if (!r.cupti.is_object()) continue;
        const auto n = [&](const char* k) { return r.cupti.value(k, int64_t(0)); };
        if (!r.cupti.value("running", false) && n("kernels") + n("memcpys") + n("memsets") == 0) continue;
        s += fmt::format("  {}: CUPTI recorded {} kernels ({} NCCL), {} memcpys, {} memsets; {} attributed to an op, {} "
                         "not; {} records dropped; collector overhead {:.1f} ms\n",
                         r.label, n("kernels"), n("nccl_kernels"), n("memcpys"), n("memsets"), n("attributed"),
                         n("unattributed"), n("dropped_records"), r.cupti.value("overhead_ms", 0.0));
    }
    if (!traced.empty())
        s += fmt::format("  compute of rank(s) {} is the GPU's kernels as CUPTI timed them; communication the GPU's NCCL "
                         "kernels, or the engine's collective spans where ranks communicate through MPI with host "
                         "staging\n",
                         traced);
    s += format_op_table(rep);
    s += fmt::format("\nCommunication per steady step by group: bytes sent ({} from the collectives / predicted); time "
                     "outstanding, exposed (no compute under it), and of that time the part spent waiting for the group's "
                     "last rank ({})\n", src, src);
    for (const auto& r : rep.ranks) {
        std::string line;
        for (int g : reported_groups(r)) {
            const double measured = per_step(r, r.steady.group_bytes[size_t(g)]);
            if (measured == 0 && r.predicted.comm_bytes[size_t(g)] == 0) continue;
            line += fmt::format("  {} {} / {}, {:.1f} / {:.1f} ms exposed, {:.1f} ms waiting;", kGroupNames[g],
                                format_bytes(int64_t(measured)),
                                rep.imported ? std::string("unknown") : format_bytes(r.predicted.comm_bytes[size_t(g)]),
                                1e3 * per_step(r, r.steady.group_comm_s[size_t(g)]),
                                1e3 * per_step(r, r.steady.group_exposed_s[size_t(g)]),
                                1e3 * per_step(r, r.group_wait_s[size_t(g)]));
        }
        s += fmt::format("  {:<22}{}\n", r.label, line.empty() ? "  none" : line);
    }
    if (rep.predict_input.tp > 1)
        s += "  tensor-parallel collectives block the compute thread: nothing overlaps them, all of their time is on "
             "the critical path\n";
    for (const auto& r : rep.ranks) {
        if (rep.imported) break;  // no allocator categories in a PyTorch trace: its [memory] counters are elsewhere
        s += fmt::format("\nMemory of {} (peak {} / predicted / formula; phase at the peak; step 1 / steady):\n",
                         r.label, src);
        auto or_dash = [](const std::optional<int64_t>& v) { return v ? format_bytes(*v) : std::string("-"); };
        for (int k = 0; k < kMemCategoryCount; ++k) {
            const auto& pred = r.predicted.memory[size_t(k)];
            if (r.memory.peak[size_t(k)] == 0 && (!pred || *pred == 0)) continue;
            s += fmt::format("  {:<16} {:>12} / {:<12} / {:<12} {:<10} {:>12} / {}\n", kMemCategoryNames[k],
                             format_bytes(r.memory.peak[size_t(k)]), or_dash(pred),
                             or_dash(r.predicted.memory_formula[size_t(k)]),
                             kPhaseNames[size_t(r.memory.peak_phase[size_t(k)])],
                             format_bytes(r.memory.step1_peak[size_t(k)]),
                             r.memory.has_steady ? format_bytes(r.memory.steady_peak[size_t(k)]) : std::string("-"));
        }
        if (!rep.config.empty())
            s += fmt::format("  {:<16} {:>12} / {:<12} / {:<12} sum of the peaks of the categories the prediction "
                             "models (the formula's: model states and activations)\n",
                             "sum of peaks", format_bytes(modelled_sum_peak(r)), format_bytes(r.predicted.memory_total()),
                             format_bytes(r.predicted.memory_formula_total()));
        s += fmt::format("  {:<16} {:>12}   {}, every category, at {} (peaks of different categories need not "
                         "coincide)\n",
                         "peak of the sum", format_bytes(r.memory.total_peak), src,
                         kPhaseNames[size_t(r.memory.total_peak_phase)]);
        if (rep.predict_input.moe_experts > 0 && (rep.predict_input.ep > 1 || rep.predict_input.moe_capacity_factor > 0))
            s += r.expert_load.empty()
                     ? "  (predicted expert rows as if routing were uniform: the measured ones follow the router)\n"
                     : fmt::format("  (predicted with the routing measured: this rank's experts received {} the uniform "
                                   "share per layer, at the step with the most rows)\n", [&] {
                                       std::string loads;
                                       for (double x : r.expert_load) loads += fmt::format("{}{:.2f}x", loads.empty() ? "" : " ", x);
                                       return loads;
                                   }());
        if (r.process.sampled) {
            s += fmt::format("  {:<16} {:>12}   peak, measured: {}\n", r.process.device ? "device in use" : "process (RSS)",
                             format_bytes(r.process.held_peak),
                             r.process.device ? "the device's memory in use as the driver reports it (all processes)"
                                              : "the resident set");
            s += fmt::format("  {:<16} {:>12}   peak, measured: freed blocks the tracked allocator keeps for reuse\n",
                             "allocator cache", format_bytes(r.process.cached_peak));
            s += fmt::format("  {:<16} {:>12}   peak of (that - the allocator's live and cached bytes) at one moment, "
                             "measured: runtime, libraries, communication buffers, fragmentation{}\n",
                             "not tracked", format_bytes(r.process.untracked_peak),
                             r.process.untracked_in_heap >= 0
                                 ? fmt::format("; then {} malloc'd by others (MPI, BLAS, runtime) and {} outside malloc "
                                               "(code, stacks, shared memory, freed pages kept)",
                                               format_bytes(r.process.untracked_in_heap),
                                               format_bytes(r.process.untracked_outside_heap))
                                 : std::string());
        }
        if (r.device_reserved_peak >= 0)
            s += fmt::format("  {:<16} {:>12}   peak measured by CUPTI: what cudaMalloc holds (caching allocator, "
                             "cuBLAS, NCCL)\n",
                             "device reserved", format_bytes(r.device_reserved_peak));
        if (rep.predict_input.pp > 1)
            s += fmt::format("  micro-batches in flight: {} measured / {} predicted by the {} schedule\n",
                             r.steady.micro_batches_in_flight, r.predicted.micro_batches_in_flight,
                             rep.predict_input.pp_schedule);
        if (r.status != "ok") s += fmt::format("  status: {}\n", r.status);
    }
    std::vector<HtaBreakdown> hta;  // HTA's own figures (hta_breakdown.h)
    for (const auto& r : rep.ranks)
        if (r.hta) hta.push_back(*r.hta);
    s += format_hta(hta);
    s += rep.imported_section.text;
    for (const auto& w : rep.warnings) s += "\nwarning: " + w + "\n";
    return s;
}

nlohmann::json report_json(const Report& rep) {
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& r : rep.ranks) {
        nlohmann::json peak = nlohmann::json::object(), pred = nlohmann::json::object(), formula = nlohmann::json::object(),
                       phase = nlohmann::json::object(), step1 = nlohmann::json::object(),
                       steady = nlohmann::json::object();
        for (int k = 0; k < kMemCategoryCount; ++k) {
            const std::string name(kMemCategoryNames[k]);
            peak[name] = r.memory.peak[size_t(k)];
            pred[name] = r.predicted.memory[size_t(k)] ? nlohmann::json(*r.predicted.memory[size_t(k)]) : nlohmann::json();
            formula[name] = r.predicted.memory_formula[size_t(k)] ? nlohmann::json(*r.predicted.memory_formula[size_t(k)])
                                                                   : nlohmann::json();
            phase[name] = std::string(kPhaseNames[size_t(r.memory.peak_phase[size_t(k)])]);
            step1[name] = r.memory.step1_peak[size_t(k)];
            steady[name] = r.memory.has_steady ? nlohmann::json(r.memory.steady_peak[size_t(k)]) : nlohmann::json();
        }
        nlohmann::json steps = nlohmann::json::array();
        for (const auto& b : r.steps)
            steps.push_back({{"step", b.step}, {"wall_s", b.wall_s}, {"compute_s", b.compute_s}, {"comm_s", b.comm_s},
                             {"p2p_s", b.p2p_s}, {"comm_overlapped_s", b.overlapped_s}, {"comm_exposed_s", b.exposed_s},
                             {"idle_s", b.idle_s}, {"overlap_pct", b.overlap_pct}, {"bubble_fraction", b.bubble_fraction},
                             {"micro_batches_in_flight", b.micro_batches_in_flight}});
        const auto& b = r.steady;
        nlohmann::json comm_bytes = nlohmann::json::object(), comm_predicted = nlohmann::json::object(),
                       comm_time = nlohmann::json::object(), comm_exposed = nlohmann::json::object(),
                       comm_wait = nlohmann::json::object();
        for (int g : reported_groups(r)) {
            const std::string name(kGroupNames[g]);
            comm_bytes[name] = per_step(r, b.group_bytes[size_t(g)]);
            comm_predicted[name] = r.predicted.comm_bytes[size_t(g)];
            comm_time[name] = b.group_comm_s[size_t(g)];
            comm_exposed[name] = b.group_exposed_s[size_t(g)];
            comm_wait[name] = r.group_wait_s[size_t(g)];
        }
        ranks.push_back({{"rank", r.rank},
                         {"comm_bytes", comm_bytes},
                         {"comm_bytes_predicted", comm_predicted},
                         {"comm_by_group_s", comm_time},
                         {"comm_exposed_by_group_s", comm_exposed},
                         {"comm_wait_by_group_s", comm_wait},
                         {"attention_s", b.attention_s},
                         {"experts_s", b.experts_s},
                         {"label", r.label},
                         {"coords", r.coords},
                         {"status", r.status},
                         {"clock_offset_ns", r.clock_offset_ns},
                         {"clock_uncertainty_ns", r.clock_uncertainty_ns},
                         {"memory_peak_bytes", peak},
                         {"memory_predicted_bytes", pred},
                         {"memory_formula_bytes", formula},
                         {"memory_modelled_sum_peak_bytes", modelled_sum_peak(r)},
                         {"memory_modelled_sum_predicted_bytes", r.predicted.memory_total()},
                         {"memory_peak_phase", phase},
                         {"memory_step1_peak_bytes", step1},
                         {"memory_steady_peak_bytes", steady},
                         {"memory_total_peak_bytes", r.memory.total_peak},
                         {"memory_process_peak_bytes", r.process.sampled ? nlohmann::json(r.process.held_peak) : nlohmann::json()},
                         {"memory_process_source", r.process.sampled ? nlohmann::json(r.process.device ? "device in use (driver, all processes)" : "resident set") : nlohmann::json()},
                         {"memory_untracked_peak_bytes", r.process.sampled ? nlohmann::json(r.process.untracked_peak) : nlohmann::json()},
                         {"memory_allocator_cache_peak_bytes", r.process.sampled ? nlohmann::json(r.process.cached_peak) : nlohmann::json()},
                         {"memory_heap_peak_bytes", r.process.heap_peak > 0 ? nlohmann::json(r.process.heap_peak) : nlohmann::json()},
                         {"memory_untracked_in_heap_bytes", r.process.untracked_in_heap >= 0 ? nlohmann::json(r.process.untracked_in_heap) : nlohmann::json()},
                         {"memory_untracked_outside_heap_bytes", r.process.untracked_outside_heap >= 0 ? nlohmann::json(r.process.untracked_outside_heap) : nlohmann::json()},
                         {"wall_s", b.wall_s},
                         {"compute_s", b.compute_s},
                         {"comm_s", b.comm_s},
                         {"p2p_s", b.p2p_s},
                         {"comm_overlapped_s", b.overlapped_s},
                         {"comm_exposed_s", b.exposed_s},
                         {"idle_s", b.idle_s},
                         {"overlap_pct", b.overlap_pct},
                         {"bubble_fraction", b.bubble_fraction},
                         {"bubble_fraction_formula", r.predicted.bubble_theory},
                         {"bubble_fraction_predicted", r.predicted.bubble_simulated},
                         {"stage_bubble_fraction", b.stage_bubble_fraction},
                         {"micro_batches_in_flight", b.micro_batches_in_flight},
                         {"micro_batches_in_flight_predicted", r.predicted.micro_batches_in_flight},
                         {"activations_peak_bytes", r.memory.peak[size_t(MemCategory::activations)]},
                         {"activations_predicted_bytes", r.predicted.memory[size_t(MemCategory::activations)].value_or(0)},
                         {"device_peak_gflops", r.peak_gflops},
                         {"device_peak_source", r.peak_source},
                         {"time_source", b.device_truth ? "device" : "engine"},
                         {"device_reserved_peak_bytes",
                          r.device_reserved_peak >= 0 ? nlohmann::json(r.device_reserved_peak) : nlohmann::json()},
                         {"dropped_events", r.dropped_events},
                         {"expert_load", r.expert_load},
                         {"cupti", r.cupti},
                         {"ops", op_table_json(r.ops)},
                         {"steps", steps}});
        if (r.hta) ranks.back()["hta"] = hta_json(*r.hta);
    }
    const auto& t = rep.throughput;
    return {{"world_size", rep.world_size},
            {"config", rep.config},
            {"source", rep.is_predicted() ? "predicted" : "measured"},
            {"predicted_by_planner", rep.predicted},
            {"ranks", ranks},
            {"throughput",
             {{"steps_measured", t.steps_measured},
              {"step_s", t.step_s},
              {"tokens_per_s", t.tokens_per_s},
              {"model_flops_per_token_formula", t.model_flops_per_token},
              {"achieved_flops_per_s_derived", t.achieved_flops_per_s},
              {"peak_flops_per_s", t.peak_flops_per_s},
              {"peak_source", t.peak_sources},
              {"mfu_derived", t.mfu}}},
            {"predicted", prediction_json(rep.predict_input, predict(rep.predict_input))},
            {"pipeline",
             {{"bubble_fraction", rep.pipeline.measured},
              {"bubble_fraction_formula", rep.pipeline.theory},
              {"bubble_fraction_predicted", rep.pipeline.simulated},
              {"busiest_rank", rep.pipeline.busiest_rank}}},
            {"context_parallel",
             {{"attention_max_over_min", rep.context.attention_max_over_min},
              {"attention_flops_max_over_min", rep.context.attention_flops_max_over_min},
              {"slowest_rank", rep.context.slowest_rank},
              {"fastest_rank", rep.context.fastest_rank}}},
            {"experts",
             rep.routing.empty()
                 ? nlohmann::json()
                 : [&] {
                       nlohmann::json j = expert_routing_json(rep.routing);
                       j["experts_max_over_min"] = rep.expert_balance.experts_max_over_min;
                       j["slowest_rank"] = rep.expert_balance.slowest_rank;
                       j["fastest_rank"] = rep.expert_balance.fastest_rank;
                       return j;
                   }()},
            {"imported", rep.imported_section.json},
            {"warnings", rep.warnings},
            {"misses", misses_json(rep.misses)}};
}

}  // namespace us::prof
