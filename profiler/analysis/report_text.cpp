// format_report(): the report as text (`ultrascope report`), section by section: the run, where it misses its
// prediction, throughput, parallelism (pipeline, context, experts), clocks, time per rank, the busiest rank's ops,
// communication by group, memory per rank, HTA's figures, an imported run's own section and the warnings.
#include <fmt/format.h>

#include <algorithm>

#include "common/core/format.h"
#include "common/core/memory_category.h"
#include "profiler/analysis/report.h"

namespace us::prof {

namespace {

// " (across 2 nodes; ring edge inter-node)": the group spans nodes, and whether this rank's sends in the group's ring
// go to another node (the formula's split: a ring all-reduce sends every byte to the next rank).
std::string across_nodes(int hosts, int8_t successor_across) {
    const char* edge = successor_across == 1   ? "; its ring edge inter-node"
                       : successor_across == 0 ? "; its ring edge in-node"
                                               : "";
    return fmt::format(" (across {} nodes{})", hosts, edge);
}

// The busiest rank's op table, its heaviest rows (the JSON has every row of every rank).
std::string format_op_table(const Report& rep) {
    const RankReport* busiest = nullptr;
    for (const auto& r : rep.ranks)
        if (!r.ops.rows.empty() && (!busiest || r.steady.compute_s > busiest->steady.compute_s)) busiest = &r;
    if (!busiest) return {};
    const OpTable& t = busiest->ops;
    constexpr size_t kShown = 14;
    std::string s = fmt::format(
        "\nWhere the compute goes on {}{}, per steady step ({}, {} step(s); self time: nested "
        "ops taken out; GFLOP/s from the FLOPs the op spans carry):\n",
        busiest->label, rep.ranks.size() > 1 ? " (the busiest rank)" : "", rep.source(), t.steps);
    s += fmt::format("  {:<44} {:<11} {:>7} {:>10} {:>7} {:>10} {:>9}\n", t.device_kernels ? "GPU kernel" : "op",
                     "class", "calls", "ms", "% wall", "us/call", "GFLOP/s");
    bool causal_note = false;
    for (size_t i = 0; i < std::min(kShown, t.rows.size()); ++i) {
        const OpRow& r = t.rows[i];
        const double rate = OpTable::flop_rate(r);
        const std::string name = fit_op_name(r.short_name, 44);
        s += fmt::format(
            "  {:<44} {:<11} {:>7.1f} {:>10.3f} {:>6.1f}% {:>10.1f} {:>9}\n", name, r.kind, double(r.calls) / t.steps,
            1e3 * t.per_step(r.self_s), 100 * t.share_of_wall(r.self_s), 1e6 * r.per_call_s(),
            rate > 0 ? fmt::format("{:.1f}{}", rate / 1e9, r.flops_count_whole_square() ? "*" : "") : std::string("-"));
        causal_note |= r.flops_count_whole_square();
    }
    if (t.rows.size() > kShown) {
        double rest = 0;
        for (size_t i = kShown; i < t.rows.size(); ++i) rest += t.rows[i].self_s;
        s += fmt::format("  {:<44} {:<11} {:>7} {:>10.3f} {:>6.1f}%\n",
                         fmt::format("the other {} ops", t.rows.size() - kShown), "", "", 1e3 * t.per_step(rest),
                         100 * t.share_of_wall(rest));
    }
    s += fmt::format(
        "  all ops {:.3f} ms of a {:.3f} ms step ({:.1f}%); the rest is communication not under compute, "
        "waiting and idle\n",
        1e3 * t.per_step(t.self_s()), 1e3 * t.per_step(t.wall_s), 100 * t.share_of_wall(t.self_s()));
    if (causal_note)
        s += "  * attention FLOPs count the whole s x s square, as the 6N + 12*L*h*s formula does; a causal kernel "
             "computes about half of it, so its own rate is about half the figure\n";
    return s;
}

// The run: a planner's prediction says so first; the model and batch; a mixture of experts' shape.
std::string format_run(const Report& rep) {
    std::string s;
    const auto& c = rep.config;
    if (rep.is_predicted()) {
        const auto& p = rep.predicted;
        s += fmt::format(
            "PREDICTED, not a run: the planner's model of {} on {} GPUs of {} ({}); {} rank(s) drawn, one per "
            "pipeline stage: each is the stage's rank with tp, cp, dp and ep index 0. Every figure below "
            "is the model's.\n",
            p.value("model", std::string("?")), p.value("gpus", 0), p.value("cluster", std::string("?")),
            p.value("layout", std::string("?")), rep.world_size);
    }
    if (!c.empty())
        s += fmt::format(
            "Run: {} rank(s); model h {} L {} heads {} seq {} vocab {}; micro-batch {} x {} micro-batches; {}; "
            "ZeRO-{}; attention {}\n",
            rep.world_size, c.value("hidden", 0), c.value("layers", 0), c.value("heads", 0), c.value("seq", 0),
            c.value("vocab", 0), c.value("batch", 0), c.value("grad_accum", 0), c.value("precision", std::string("?")),
            c.value("zero", 0), c.value("attention", std::string("naive")));
    if (rep.predict_input.moe_experts > 0)
        s += fmt::format(
            "  mixture of experts: every {} block(s) E {} experts, top-{}, ep {}; {} parameters, {} active "
            "per token\n",
            rep.predict_input.moe_every, rep.predict_input.moe_experts, rep.predict_input.moe_topk,
            rep.predict_input.parallel.ep, predict::predict(rep.predict_input).params,
            predict::predict(rep.predict_input).active_params);
    if (const std::string shared = oversubscribed_words(rep.cross.core_sharing); !shared.empty())
        s += "  cores: " + shared +
             ": the ranks take turns on them, and every time below includes their turns (the threads and CPUs the "
             "ranks recorded at their start)\n";
    return s;
}

// Tokens/s, model FLOPs and MFU with their sources; an imported run has the step time only.
std::string format_throughput(const Report& rep) {
    std::string s;
    const char* src = rep.source();
    const auto& t = rep.throughput;
    if (rep.imported) {  // no model or batch in a PyTorch trace: the step time only
        s += fmt::format(
            "\nThroughput ({} over {} steady step(s)): {:.1f} ms/step (each step as long as its slowest rank); "
            "tokens/s, model FLOPs and MFU unknown for an imported run\n",
            src, t.steps_measured, t.step_s * 1e3);
        return s;
    }
    s += fmt::format(
        "\nThroughput ({} over {} steady step(s)): {:.0f} tokens/s, {:.1f} ms/step (each step as long as "
        "its slowest rank)\n",
        src, t.steps_measured, t.tokens_per_s, t.step_s * 1e3);
    std::string sources;
    for (const std::string& peak_source : t.peak_sources) sources += (sources.empty() ? "" : "; ") + peak_source;
    s += fmt::format(
        "  model FLOPs/token (formula, 6N + 12*L*h*s{}): {:.1f} M; achieved {:.1f} GFLOP/s (derived) of a "
        "peak of {:.1f} GFLOP/s summed over the {}: MFU {:.1f}% (derived)\n  peak: {}\n",
        rep.predict_input.moe_experts > 0 ? ", N active" : "", t.model_flops_per_token / 1e6,
        t.achieved_flops_per_s / 1e9, t.peak_flops_per_s / 1e9, rep.is_predicted() ? "plan's GPUs" : "ranks",
        100 * t.mfu, sources.empty() ? std::string("unknown") : sources);
    // The attention term counts every query against every key; causal kernels skip the masked half, so when the term
    // is a large share the MFU overstates what the hardware did. Say so where it matters (long sequences).
    const predict::PredictInput& pi = rep.predict_input;
    const double attention_share = t.model_flops_per_token > 0 ? 12.0 * double(pi.layers) * double(pi.hidden) *
                                                                     double(pi.seq) / t.model_flops_per_token
                                                               : 0;
    if (attention_share >= 0.1 && !rep.is_predicted())
        s += fmt::format(
            "  attention's 12*L*h*s is {:.0f}% of those FLOPs (formula): it counts the whole s x s square, as PaLM's MFU "
            "does; causal kernels skip about half of it, so the hardware did less than this MFU reads\n",
            100 * attention_share);
    if (t.mfu > 1.0 && !rep.is_predicted())
        s += fmt::format(
            "  the MFU is above 100%: the run did more FLOPs per second than the peak measured at its start "
            "(that measurement was short and the machine shared, or the formula counts FLOPs the kernels "
            "skipped); read it as near the peak, not beyond it\n");
    return s;
}

// The pipeline's bubble, context parallelism's balance, and the experts' routing and balance.
std::string format_parallelism(const Report& rep) {
    std::string s;
    const char* src = rep.source();
    if (rep.predict_input.parallel.pp > 1)
        s += fmt::format(
            "Pipeline bubble ({} schedule, pp {}, {} micro-batches): {:.3f} {} on the busiest stage "
            "(rank {}), {:.3f} by the formula, {:.3f} simulated\n",
            schedule_name(rep.predict_input.parallel.pp_schedule), rep.predict_input.parallel.pp,
            rep.predict_input.grad_accum, rep.pipeline.measured, src, rep.pipeline.busiest_rank, rep.pipeline.theory,
            rep.pipeline.simulated);
    if (rep.predict_input.parallel.cp > 1)
        s += fmt::format(
            "Context parallelism (cp {}, {}, {}): attention time per rank, slowest / fastest in a cp group "
            "= {:.2f} (rank {} / rank {}, measured); attention FLOPs most / least {:.2f}\n",
            rep.predict_input.parallel.cp, cp_balance_name(rep.predict_input.parallel.cp_balance),
            cp_comm_name(rep.predict_input.parallel.cp_comm), rep.context.attention_max_over_min,
            rep.context.slowest_rank, rep.context.fastest_rank, rep.context.attention_flops_max_over_min);
    if (rep.routing.empty()) return s;
    const ExpertRouting& ro = rep.routing;
    s += fmt::format("Experts (measured, choices of the global batch; E {}, top-{}{}):\n", ro.experts,
                     rep.predict_input.moe_topk,
                     rep.predict_input.moe_capacity_factor > 0
                         ? fmt::format(", capacity factor {:.2f}", rep.predict_input.moe_capacity_factor)
                         : std::string(", dropless"));
    for (const LayerRouting& l : ro.layers) {
        std::string shares;
        for (double x : l.share) shares += fmt::format("{}{:.0f}%", shares.empty() ? "" : " ", 100 * x);
        s += fmt::format(
            "  layer {}: share per expert {} (even: {:.0f}% each); most loaded / mean {:.2f} (worst "
            "step {:.2f}); dropped {:.1f}%\n",
            l.layer, shares, 100.0 / std::max(1, ro.experts), l.imbalance_mean, l.imbalance_max,
            100 * l.dropped_fraction);
    }
    if (!ro.balance.empty()) {
        double b = 0, a = 0;
        for (size_t i = 0; i < ro.balance.size(); ++i) b += ro.balance[i], a += ro.aux_loss[i];
        s += fmt::format(
            "  balance E*sum(f*P) {:.3f} mean over {} step(s) (1 even, E on one expert); balance loss "
            "added to the training loss {:.4f}\n",
            b / double(ro.balance.size()), ro.balance.size(), a / double(ro.balance.size()));
    }
    if (rep.expert_balance.slowest_rank >= 0)
        s += fmt::format(
            "  expert GEMM time per rank, slowest / fastest in an ep group = {:.2f} (rank {} / rank "
            "{}): the others wait for the slowest in the next all-to-all (ep waiting below)\n",
            rep.expert_balance.experts_max_over_min, rep.expert_balance.slowest_rank, rep.expert_balance.fastest_rank);
    return s;
}

// Each rank's clock offset against rank 0, when any was estimated.
std::string format_clocks(const Report& rep) {
    bool clocks_estimated = false;
    for (const auto& r : rep.ranks) clocks_estimated |= r.clock_offset_ns != 0 || r.clock_uncertainty_ns != 0;
    if (!clocks_estimated) return {};
    std::string s = "\nClocks (measured: MPI ping-pong against rank 0; each rank's times are shifted by its offset):\n";
    for (const auto& r : rep.ranks)
        s += fmt::format("  {:<22} offset {:+.6f} ms +- {:.1f} us\n", r.label, double(r.clock_offset_ns) / 1e6,
                         double(r.clock_uncertainty_ns) / 1e3);
    return s;
}

// Time per rank over the steady steps (the rank losing most marked), CUPTI's account, and where the times come from.
std::string format_time_table(const Report& rep) {
    std::string s = fmt::format("\nTime per rank, summed over the steady steps ({}):\n", rep.source());
    s += fmt::format("  {:<22} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>15}\n", "rank", "wall s", "compute s",
                     "overlap s", "exposed s", "idle s", "overlap", "bubble (theory)");
    // The ranks blame names (blame.h): the straggler others wait for, the pipeline's bottleneck stage. The most
    // idle rank is usually a victim, so it is not marked.
    const auto mark = [&](int rank) -> std::string {
        for (const auto& s : rep.cross.blame.stragglers)
            if (s.stands_out && s.rank == rank) return "  <- holds the others back";
        for (const auto& p : rep.cross.blame.pipelines)
            if (p.stands_out && p.bottleneck_rank == rank) return "  <- bottleneck stage";
        return "";
    };
    std::string traced;  // ranks whose C and M are the GPU's own record
    for (const auto& r : rep.ranks)
        if (r.steady.device_truth) traced += fmt::format("{}{}", traced.empty() ? "" : ", ", r.rank);
    for (size_t i = 0; i < rep.ranks.size(); ++i) {
        const auto& r = rep.ranks[i];
        const auto& b = r.steady;
        const std::string bubble = rep.predict_input.parallel.pp > 1
                                       ? fmt::format("{:>6.3f} ({:.3f})", b.bubble_fraction, r.predicted.bubble_theory)
                                       : fmt::format("{:>15}", "-");
        s += fmt::format("  {:<22} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>7.1f}% {}{}\n", r.label, b.wall_s,
                         b.compute_s, b.overlapped_s, b.exposed_s, b.idle_s, b.overlap_pct, bubble, mark(r.rank));
    }
    // The machine's other load, where it took more than 1% of a rank's steps: its thread ready but without a core.
    std::string waited;
    for (const auto& r : rep.ranks)
        if (r.runqueue_wait_s > 0.01 * r.steady.wall_s)
            waited += fmt::format("{}rank {} {:.3f} s ({:.0f}%)", waited.empty() ? "" : ", ", r.rank, r.runqueue_wait_s,
                                  100 * r.runqueue_wait_s / r.steady.wall_s);
    if (const std::string shared = oversubscribed_words(rep.cross.core_sharing); !waited.empty())
        s += fmt::format("  waited for a core (measured: the kernel's run queue; {}): {}\n",
                         shared.empty() ? "the machine's other load" : shared + ", besides the machine's other load",
                         waited);
    for (const auto& r : rep.ranks) {
        if (!r.cupti.is_object()) continue;
        const auto n = [&](const char* k) { return r.cupti.value(k, int64_t(0)); };
        if (!r.cupti.value("running", false) && n("kernels") + n("memcpys") + n("memsets") == 0) continue;
        s += fmt::format(
            "  {}: CUPTI recorded {} kernels ({} NCCL), {} memcpys, {} memsets; {} attributed to an op, {} "
            "not; {} records dropped; collector overhead {:.1f} ms\n",
            r.label, n("kernels"), n("nccl_kernels"), n("memcpys"), n("memsets"), n("attributed"), n("unattributed"),
            n("dropped_records"), r.cupti.value("overhead_ms", 0.0));
    }
    if (!traced.empty())
        s += fmt::format(
            "  compute of rank(s) {} is the GPU's kernels as CUPTI timed them; communication the GPU's NCCL "
            "kernels, or the engine's collective spans where ranks communicate through MPI with host "
            "staging\n",
            traced);
    return s;
}

// Per rank and group: bytes sent measured / predicted, time exposed, time waiting for the group's last rank.
std::string format_communication(const Report& rep) {
    const char* src = rep.source();
    std::string s = fmt::format(
        "\nCommunication per steady step by group: bytes sent ({} from the collectives / predicted); time "
        "outstanding, exposed (no compute under it), and of that time the part spent waiting for the group's "
        "last rank ({})\n",
        src, src);
    for (const auto& r : rep.ranks) {
        std::string line;
        for (const GroupKind kind : reported_groups(r)) {
            const size_t g = size_t(kind);
            const double measured = per_steady_step(r, r.steady.group_bytes[g]);
            const double busy_s = per_steady_step(r, r.steady.group_comm_s[g]);
            if (measured == 0 && r.predicted.comm_bytes[g] == 0 && busy_s == 0) continue;
            // Time without bytes: the trace's collectives did not say their sizes (a TensorList's), not nothing sent.
            line += fmt::format("  {}{} {} / {}, {:.1f} / {:.1f} ms exposed, {:.1f} ms waiting;", group_kind_name(kind),
                                r.group_hosts[g] > 1 ? across_nodes(r.group_hosts[g], r.ring_successor_across[g]) : "",
                                measured == 0 && busy_s > 0 ? std::string("unknown") : format_bytes(int64_t(measured)),
                                rep.imported ? std::string("unknown") : format_bytes(r.predicted.comm_bytes[g]),
                                1e3 * busy_s, 1e3 * per_steady_step(r, r.steady.group_exposed_s[g]),
                                1e3 * per_steady_step(r, rep.cross.group_waits_of(r.rank)[g]));
        }
        s += fmt::format("  {:<22}{}\n", r.label, line.empty() ? "  none" : line);
    }
    if (rep.predict_input.parallel.tp > 1)
        s += "  tensor-parallel collectives block the compute thread: nothing overlaps them, all of their time is on "
             "the critical path\n";
    return s;
}

// What the process held beyond the categories: the resident set or the device's memory in use, the allocator's
// cache, and the rest (runtime, libraries, buffers).
std::string format_process_memory(const RankReport& r) {
    std::string s;
    s += fmt::format(
        "  {:<16} {:>12}   peak, measured: {}\n", r.process.device ? "device in use" : "process (RSS)",
        format_bytes(r.process.held_peak),
        r.process.device ? "the device's memory in use as the driver reports it (all processes)" : "the resident set");
    s += fmt::format("  {:<16} {:>12}   peak, measured: freed blocks the tracked allocator keeps for reuse\n",
                     "allocator cache", format_bytes(r.process.cached_peak));
    s += fmt::format(
        "  {:<16} {:>12}   peak of (that - the allocator's live and cached bytes) at one moment, "
        "measured: runtime, libraries, communication buffers, fragmentation{}\n",
        "not tracked", format_bytes(r.process.untracked_peak),
        r.process.untracked_in_heap >= 0
            ? fmt::format("; then {} malloc'd by others (MPI, BLAS, runtime) and {} outside malloc "
                          "(code, stacks, shared memory, freed pages kept)",
                          format_bytes(r.process.untracked_in_heap), format_bytes(r.process.untracked_outside_heap))
            : std::string());
    for (const DeviceMemoryPart& part : r.process.named_untracked)
        s += fmt::format("    {:<40} {:>12}   measured: the device's untracked memory before and after it\n", part.name,
                         format_bytes(part.bytes));
    if (!r.process.named_untracked.empty())
        s += "    (device-wide readings: another process allocating on this GPU meanwhile counts in the part it "
             "started during)\n";
    return s;
}

// One rank's memory: each category's peak against the prediction and the formula, the sums, what the process held,
// the device's reserved bytes and the micro-batches in flight.
std::string format_rank_memory(const Report& rep, const RankReport& r) {
    const char* src = rep.source();
    std::string s = fmt::format("\nMemory of {} (peak {} / predicted / formula; phase at the peak; step 1 / steady):\n",
                                r.label, src);
    auto or_dash = [](const std::optional<int64_t>& v) { return v ? format_bytes(*v) : std::string("-"); };
    for (int k = 0; k < kMemCategoryCount; ++k) {
        const auto& pred = r.predicted.memory[size_t(k)];
        if (r.memory.peak[size_t(k)] == 0 && (!pred || *pred == 0)) continue;
        s += fmt::format(
            "  {:<16} {:>12} / {:<12} / {:<12} {:<10} {:>12} / {}\n", kMemCategoryNames[k],
            format_bytes(r.memory.peak[size_t(k)]), or_dash(pred), or_dash(r.predicted.memory_formula[size_t(k)]),
            kPhaseNames[size_t(r.memory.peak_phase[size_t(k)])], format_bytes(r.memory.step1_peak[size_t(k)]),
            r.memory.has_steady ? format_bytes(r.memory.steady_peak[size_t(k)]) : std::string("-"));
    }
    if (!rep.config.empty())
        s += fmt::format(
            "  {:<16} {:>12} / {:<12} / {:<12} sum of the peaks of the categories the prediction "
            "models (the formula's: model states and activations)\n",
            "sum of peaks", format_bytes(r.memory_modelled_sum_peak), format_bytes(r.predicted.memory_total()),
            format_bytes(r.predicted.memory_formula_total()));
    s += fmt::format(
        "  {:<16} {:>12}   {}, every category, at {} (peaks of different categories need not "
        "coincide)\n",
        "peak of the sum", format_bytes(r.memory.total_peak), src, kPhaseNames[size_t(r.memory.total_peak_phase)]);
    if (rep.predict_input.moe_experts > 0 &&
        (rep.predict_input.parallel.ep > 1 || rep.predict_input.moe_capacity_factor > 0))
        s += r.expert_load.empty()
                 ? "  (predicted expert rows as if routing were uniform: the measured ones follow the router)\n"
                 : fmt::format(
                       "  (predicted with the routing measured: this rank's experts received {} the uniform "
                       "share per layer, at the step with the most rows)\n",
                       [&] {
                           std::string loads;
                           for (double x : r.expert_load)
                               loads += fmt::format("{}{:.2f}x", loads.empty() ? "" : " ", x);
                           return loads;
                       }());
    if (r.process.sampled) s += format_process_memory(r);
    if (r.device_reserved_peak >= 0)
        s += fmt::format(
            "  {:<16} {:>12}   peak measured by CUPTI: what cudaMalloc holds (caching allocator, "
            "cuBLAS, NCCL)\n",
            "device reserved", format_bytes(r.device_reserved_peak));
    if (rep.predict_input.parallel.pp > 1)
        s += fmt::format("  micro-batches in flight: {} measured / {} predicted by the {} schedule\n",
                         r.steady.micro_batches_in_flight, r.predicted.micro_batches_in_flight,
                         schedule_name(rep.predict_input.parallel.pp_schedule));
    if (r.status != "ok") s += fmt::format("  status: {}\n", r.status);
    return s;
}

}  // namespace

std::string format_report(const Report& rep) {
    std::string s = format_run(rep);
    if (!rep.misses.empty()) {  // first: where the run and its prediction part
        s += '\n';
        s += format_misses(rep.misses);
    }
    s += format_throughput(rep);
    s += format_parallelism(rep);
    s += format_clocks(rep);
    s += format_time_table(rep);
    s += format_op_table(rep);
    s += format_communication(rep);
    if (!rep.imported)  // no allocator categories in a PyTorch trace: its [memory] counters are elsewhere
        for (const auto& r : rep.ranks) s += format_rank_memory(rep, r);
    std::vector<HtaBreakdown> hta;  // HTA's own figures (hta_breakdown.h)
    for (const auto& r : rep.ranks)
        if (r.hta) hta.push_back(*r.hta);
    s += format_hta(hta);
    s += rep.imported_section.text;
    for (const auto& w : rep.warnings) s += "\nwarning: " + w + "\n";
    return s;
}

}  // namespace us::prof
