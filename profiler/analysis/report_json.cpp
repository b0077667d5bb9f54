// report_json(): the report as JSON (`ultrascope report --json`; docs/report-schema.md documents every key).
#include "common/core/memory_category.h"
#include "profiler/analysis/report.h"

namespace us::prof {

namespace {

nlohmann::json op_table_json(const OpTable& t) {
    nlohmann::json rows = nlohmann::json::array();
    for (const OpRow& r : t.rows)
        rows.push_back({{"name", r.name},
                        {"short_name", r.short_name},
                        {"class", kOpClassNames[size_t(r.op)]},
                        {"kind", r.kind},
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

// The untracked device memory by name ({name: bytes}), null where the rank did not measure it (a CPU rank).
nlohmann::json named_untracked_json(const ProcessMemoryPeaks& p) {
    if (p.named_untracked.empty()) return nullptr;
    nlohmann::json j = nlohmann::json::object();
    for (const DeviceMemoryPart& part : p.named_untracked) j[part.name] = part.bytes;
    return j;
}

// Memory by category (measured peaks, predictions, formulas, the phase of each peak, step 1's and the steady
// steps' peaks) and what the process held beyond the categories.
void add_memory(const RankReport& r, nlohmann::json& j) {
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
    const ProcessMemoryPeaks& p = r.process;
    auto sampled = [&](const nlohmann::json& v) { return p.sampled ? v : nlohmann::json(); };
    j.update({{"memory_peak_bytes", peak},
              {"memory_predicted_bytes", pred},
              {"memory_formula_bytes", formula},
              {"memory_modelled_sum_peak_bytes", r.memory_modelled_sum_peak},
              {"memory_modelled_sum_predicted_bytes", r.predicted.memory_total()},
              {"memory_peak_phase", phase},
              {"memory_step1_peak_bytes", step1},
              {"memory_steady_peak_bytes", steady},
              {"memory_total_peak_bytes", r.memory.total_peak},
              {"memory_process_peak_bytes", sampled(p.held_peak)},
              {"memory_process_source", sampled(p.device ? "device in use (driver, all processes)" : "resident set")},
              {"memory_untracked_peak_bytes", sampled(p.untracked_peak)},
              {"memory_allocator_cache_peak_bytes", sampled(p.cached_peak)},
              {"memory_heap_peak_bytes", p.heap_peak > 0 ? nlohmann::json(p.heap_peak) : nlohmann::json()},
              {"memory_untracked_in_heap_bytes",
               p.untracked_in_heap >= 0 ? nlohmann::json(p.untracked_in_heap) : nlohmann::json()},
              {"memory_untracked_outside_heap_bytes",
               p.untracked_outside_heap >= 0 ? nlohmann::json(p.untracked_outside_heap) : nlohmann::json()},
              {"memory_untracked_named_bytes", named_untracked_json(p)},
              {"activations_peak_bytes", r.memory.peak[size_t(MemCategory::activations)]},
              {"activations_predicted_bytes", r.predicted.memory[size_t(MemCategory::activations)].value_or(0)}});
}

// Communication by group: bytes sent (measured and predicted), time outstanding, exposed and waiting for the
// group's last rank (`waits`, the run's: cross_rank.h), the group's hosts and the bytes that crossed nodes.
void add_communication(const RankReport& r, const std::array<double, kGroupCount>& waits, nlohmann::json& j) {
    const auto& b = r.steady;
    nlohmann::json comm_bytes = nlohmann::json::object(), comm_predicted = nlohmann::json::object(),
                   comm_time = nlohmann::json::object(), comm_exposed = nlohmann::json::object(),
                   comm_wait = nlohmann::json::object(), hosts = nlohmann::json::object(),
                   inter_node = nlohmann::json::object();
    for (const GroupKind kind : reported_groups(r)) {
        const size_t g = size_t(kind);
        const std::string name(group_kind_name(kind));
        comm_bytes[name] = per_steady_step(r, b.group_bytes[g]);
        comm_predicted[name] = r.predicted.comm_bytes[g];
        comm_time[name] = b.group_comm_s[g];
        comm_exposed[name] = b.group_exposed_s[g];
        comm_wait[name] = waits[g];
        hosts[name] = r.group_hosts[g] > 0 ? nlohmann::json(r.group_hosts[g]) : nlohmann::json();
        inter_node[name] = r.ring_successor_across[g] < 0
                               ? nlohmann::json()
                               : nlohmann::json(r.ring_successor_across[g] == 1 ? comm_bytes[name].get<double>() : 0.0);
    }
    j.update({{"comm_bytes", comm_bytes},
              {"comm_bytes_predicted", comm_predicted},
              {"comm_by_group_s", comm_time},
              {"comm_exposed_by_group_s", comm_exposed},
              {"comm_wait_by_group_s", comm_wait},
              {"comm_hosts_by_group", hosts},
              {"comm_bytes_inter_node", inter_node}});
}

// Where a step's time went (one step, or the steady steps'): the figures a step and a rank share.
nlohmann::json time_split_json(const StepBreakdown& b) {
    return {{"wall_s", b.wall_s},
            {"compute_s", b.compute_s},
            {"comm_s", b.comm_s},
            {"p2p_s", b.p2p_s},
            {"comm_overlapped_s", b.overlapped_s},
            {"comm_exposed_s", b.exposed_s},
            {"idle_s", b.idle_s},
            {"overlap_pct", b.overlap_pct},
            {"bubble_fraction", b.bubble_fraction},
            {"micro_batches_in_flight", b.micro_batches_in_flight}};
}

nlohmann::json steps_json(const RankReport& r) {
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& b : r.steps) {
        nlohmann::json step = time_split_json(b);
        step["step"] = b.step;
        steps.push_back(std::move(step));
    }
    return steps;
}

// One rank's figures: where its steady steps' time went, its pipeline and device figures, then memory and
// communication (above), its ops and its steps.
nlohmann::json rank_json(const RankReport& r, const std::array<double, kGroupCount>& waits) {
    const auto& b = r.steady;
    nlohmann::json j = {
        {"rank", r.rank},
        {"attention_s", b.attention_s},
        {"experts_s", b.experts_s},
        {"label", r.label},
        {"host", r.host.empty() ? nlohmann::json() : nlohmann::json(r.host)},
        {"coords", grid_json(r.coords)},
        {"status", r.status},
        {"clock_offset_ns", r.clock_offset_ns},
        {"clock_uncertainty_ns", r.clock_uncertainty_ns},
        {"bubble_fraction_formula", r.predicted.bubble_theory},
        {"bubble_fraction_predicted", r.predicted.bubble_simulated},
        {"stage_bubble_fraction", b.stage_bubble_fraction},
        {"micro_batches_in_flight_predicted", r.predicted.micro_batches_in_flight},
        {"device_peak_gflops", r.peak_gflops},
        {"device_peak_source", r.peak_source},
        {"time_source", b.device_truth ? "device" : "engine"},
        {"device_reserved_peak_bytes",
         r.device_reserved_peak >= 0 ? nlohmann::json(r.device_reserved_peak) : nlohmann::json()},
        {"runqueue_wait_s", r.runqueue_wait_s >= 0 ? nlohmann::json(r.runqueue_wait_s) : nlohmann::json()},
        {"worker_runqueue_wait_s",
         r.worker_runqueue_wait_s >= 0 ? nlohmann::json(r.worker_runqueue_wait_s) : nlohmann::json()},
        {"thread_cpu_s", r.thread_cpu_s >= 0 ? nlohmann::json(r.thread_cpu_s) : nlohmann::json()},
        {"worker_cpu_s", r.worker_cpu_s >= 0 ? nlohmann::json(r.worker_cpu_s) : nlohmann::json()},
        {"dropped_events", r.dropped_events},
        {"expert_load", r.expert_load},
        {"cupti", r.cupti},
        {"ops", op_table_json(r.ops)},
        {"steps", steps_json(r)}};
    j.update(time_split_json(b));  // the steady steps' time split, as each step's
    add_memory(r, j);
    add_communication(r, waits, j);
    if (r.hta) j["hta"] = hta_json(*r.hta);
    return j;
}

}  // namespace

nlohmann::json report_json(const Report& rep) {
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& r : rep.ranks) ranks.push_back(rank_json(r, rep.cross.group_waits_of(r.rank)));
    const auto& t = rep.throughput;
    return {{"world_size", rep.world_size},
            {"config", rep.config},
            {"source", rep.is_predicted() ? "predicted" : "measured"},
            {"predicted_by_planner", rep.predicted},
            {"blame", blame_json(rep.cross.blame)},
            {"core_sharing", core_sharing_json(rep.cross.core_sharing)},
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
            {"predicted", predict::prediction_json(rep.predict_input, predict::predict(rep.predict_input))},
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
