// The report's words for an imported PyTorch run (imported_run.h).
#include "profiler/analysis/imported_report.h"
#include "profiler/trace/kineto_counters.h"

#include <algorithm>
#include <fmt/format.h>

namespace us::prof {

namespace {
// The largest value of a counter on a rank, or -1 when the rank has none.
double counter_peak(const TraceStore& store, const RankTrace& rt, const char* name) {
    const uint32_t id = store.find_name(name);
    auto it = rt.counters.find(id);
    if (id == UINT32_MAX || it == rt.counters.end() || it->second.empty()) return -1;
    double peak = 0;
    for (const auto& p : it->second) peak = std::max(peak, p.value);
    return peak;
}
constexpr const char* kMemoryCounters[] = {kKinetoAllocatedCounter, kKinetoReservedCounter, kKinetoCpuAllocatedCounter};
}  // namespace

nlohmann::json imported_memory_json(const TraceStore& store) {
    nlohmann::json out = nlohmann::json::object();
    for (int r : store.ranks()) {
        nlohmann::json rank = nlohmann::json::object();
        for (const char* c : kMemoryCounters) {
            const double peak = counter_peak(store, *store.rank(r), c);
            rank[std::string(c) + "_peak"] = peak < 0 ? nlohmann::json(nullptr) : nlohmann::json(peak);
        }
        out[std::to_string(r)] = rank;
    }
    return out;
}

std::string imported_header(const RunInfo& run, const TraceStore& store) {
    std::string s = fmt::format(
        "Imported from PyTorch's profiler (Kineto): {} rank file(s), world size {}, backend {}; "
        "steps from {}\n",
        run.files.size(), run.world_size > 0 ? std::to_string(run.world_size) : "unknown",
        run.backend.empty() ? "unknown" : run.backend,
        run.steps_from == "window" ? std::string("the whole profiled window (no ProfilerStep)")
        : run.steps_from == "Optimizer.step"
            ? std::string("the optimizer's steps (no ProfilerStep: each ends where "
                          "an Optimizer.step ends)")
            : fmt::format("{} (Kineto's ProfilerStep#N is step N+{} here)", run.steps_from, run.kineto_step_offset));
    for (const auto& g : run.process_groups)
        s += fmt::format("  process group {} '{}': {} ranks, {}\n", g.name, g.desc, g.ranks.size(),
                         g.kind.empty() ? "parallelism unknown" : g.kind + " (from " + g.kind_from + ")");
    for (int r : store.ranks()) {
        const double alloc = counter_peak(store, *store.rank(r), kMemoryCounters[0]);
        const double reserved = counter_peak(store, *store.rank(r), kMemoryCounters[1]);
        const double cpu = counter_peak(store, *store.rank(r), kMemoryCounters[2]);
        if (alloc < 0 && cpu < 0)
            s += fmt::format("  rank {} memory: unknown (no [memory] events: record with profile_memory=True)\n", r);
        if (alloc >= 0)
            s += fmt::format(
                "  rank {} GPU memory (measured, the [memory] events): peak allocated {:.1f} MiB, reserved "
                "{:.1f} MiB\n",
                r, alloc / 1048576.0, std::max(0.0, reserved) / 1048576.0);
        if (cpu >= 0)
            s += fmt::format("  rank {} CPU memory (measured, the [memory] events): peak allocated {:.1f} MiB\n", r,
                             cpu / 1048576.0);
    }
    s += "  unknown for a PyTorch trace: the model's settings, predicted memory and times (the engine's), MFU "
         "(no FLOP counts or device peak)\n";
    return s;
}

void warn_of_missing_ranks(const TraceStore& store, std::vector<std::string>& warnings) {
    const std::vector<int> given = store.ranks();
    if (int(given.size()) >= store.world_size()) return;
    std::vector<int> missing;
    for (int r = 0; r < store.world_size() && missing.size() <= 8; ++r)
        if (!std::binary_search(given.begin(), given.end(), r)) missing.push_back(r);
    std::string names;
    for (size_t i = 0; i < missing.size() && i < 8; ++i) names += (i ? ", " : "") + std::to_string(missing[i]);
    if (missing.size() > 8) names += ", ...";
    warnings.push_back(fmt::format(
        "the files say a world of {} ranks but hold {}: no file for rank{} {}. The waits and exposed communication of "
        "the ranks given may be waits for those ranks, which neither blame nor any figure here can see: open every "
        "rank's file",
        store.world_size(), given.size(), store.world_size() - int(given.size()) == 1 ? "" : "s", names));
}

std::string imported_planner_note() {
    return "the planner needs the model and the layout (layers, hidden size, dp/tp/pp ...), which a PyTorch profiler "
           "trace does not hold";
}

nlohmann::json imported_unknowns() {
    const std::string why = "unknown for a PyTorch trace";
    return {
        {"settings", why + ": a PyTorch profiler trace does not hold the model's settings"},
        {"predicted_memory", why + ": predictions are the engine's"},
        {"memory_categories",
         why + ": the tracked allocator's categories are the engine's (the [memory] counters' peaks are in "
               "kineto_memory; categories inferred from the ops in memory_categories)"},
        {"comm_by_engine_group", why + ": the engine's groups (dp, tp, pp ...); the trace's own process groups are in "
                                       "imported.ranks[].comm_by_process_group"},
        {"mfu", why + ": no FLOP counts or device peak in the trace"},
        {"flops", why + ": its ops and kernels carry no FLOP counts"},
        {"micro_batches", why + ": its spans carry no micro-batch numbers (report --microbatches M gives "
                                "the pipeline's count)"},
        {"clock_offset", why + ": its files give no clock offset between ranks; they are read as on one clock"},
        {"context_parallel_and_experts", why + ": those figures are the engine's layers'"},
        {"planner", imported_planner_note()}};
}

void mark_imported_unknowns(nlohmann::json& report, const TraceStore& store) {
    const nlohmann::json unknown;  // null
    report["unknown_for_imported_run"] = imported_unknowns();
    // What only the engine knows: the model and the settings it was run with, and everything derived from them.
    for (const char* k : {"config", "predicted"}) report[k] = unknown;
    for (const char* k : {"tokens_per_s", "model_flops_per_token_formula", "achieved_flops_per_s_derived",
                          "peak_flops_per_s", "mfu_derived"})
        report["throughput"][k] = unknown;
    for (const char* k : {"bubble_fraction_formula", "bubble_fraction_predicted"}) report["pipeline"][k] = unknown;
    // context parallelism and experts are the engine's layers; PyTorch's are not named in the trace
    for (const char* k : {"context_parallel", "experts"}) report[k] = unknown;
    if (report.contains("ranks"))
        for (auto& rank : report["ranks"]) {
            // no FLOP counts on a PyTorch op or kernel; no micro-batch numbers on its spans; no clock offset
            // in its file (the ranks are read as on one clock)
            for (const char* k : {"experts_s", "micro_batches_in_flight", "clock_offset_ns", "clock_uncertainty_ns"})
                rank[k] = unknown;
            // the times are the PyTorch profiler's: its kernels where it traced a GPU, else its CPU ops
            if (rank.value("time_source", "") == "engine") rank["time_source"] = "kineto";
            if (rank.contains("steps"))
                for (auto& step : rank["steps"]) step["micro_batches_in_flight"] = unknown;
            if (rank.contains("ops") && rank["ops"].contains("rows"))
                for (auto& row : rank["ops"]["rows"]) row["flops_per_step"] = row["flops_per_s"] = unknown;
            // the tracked allocator's categories and their peaks: the memory is the [memory] counters' instead
            for (const char* k :
                 {"memory_peak_bytes", "memory_predicted_bytes", "memory_formula_bytes",
                  "memory_modelled_sum_peak_bytes", "memory_modelled_sum_predicted_bytes", "memory_peak_phase",
                  "memory_step1_peak_bytes", "memory_steady_peak_bytes", "memory_total_peak_bytes",
                  "activations_peak_bytes", "activations_predicted_bytes", "bubble_fraction_formula",
                  "bubble_fraction_predicted", "micro_batches_in_flight_predicted", "device_peak_gflops",
                  "device_peak_source", "comm_bytes_predicted"})
                rank[k] = unknown;
            // the engine's process groups (dp, tp, pp ...): an imported run's own groups are in
            // imported.ranks[].comm_by_process_group, by their names
            for (const char* k : {"comm_bytes", "comm_by_group_s", "comm_exposed_by_group_s", "comm_wait_by_group_s",
                                  "comm_hosts_by_group"})
                rank[k] = unknown;
        }
    report["kineto_memory"] = imported_memory_json(store);
}

}  // namespace us::prof
