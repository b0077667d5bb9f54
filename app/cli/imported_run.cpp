// The report's words for an imported PyTorch run (imported_run.h).
#include "app/cli/imported_run.h"

#include <algorithm>
#include <fmt/format.h>

namespace us::app {

namespace {
// The largest value of a counter on a rank, or -1 when the rank has none.
double counter_peak(const prof::TraceStore& store, const prof::RankTrace& rt, const char* name) {
    const uint32_t id = store.find_name(name);
    auto it = rt.counters.find(id);
    if (id == UINT32_MAX || it == rt.counters.end() || it->second.empty()) return -1;
    double peak = 0;
    for (const auto& p : it->second) peak = std::max(peak, p.value);
    return peak;
}
constexpr const char* kMemoryCounters[] = {"kineto_allocated_bytes", "kineto_reserved_bytes",
                                           "kineto_cpu_allocated_bytes"};
}  // namespace

nlohmann::json imported_memory_json(const prof::TraceStore& store) {
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

std::string imported_header(const prof::RunInfo& run, const prof::TraceStore& store) {
    std::string s = fmt::format(
        "Imported from PyTorch's profiler (Kineto): {} rank file(s), world size {}, backend {}; "
        "steps from {} (Kineto's ProfilerStep#N is step N+{} here)\n",
        run.files.size(), run.world_size > 0 ? std::to_string(run.world_size) : "unknown",
        run.backend.empty() ? "unknown" : run.backend,
        run.steps_from == "window" ? "the whole profiled window (no ProfilerStep)" : run.steps_from,
        run.kineto_step_offset);
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
    s += "  unknown for an imported run: the model's settings, predicted memory and times (the engine's), MFU "
         "(no FLOP counts or device peak)\n";
    return s;
}

std::string imported_planner_note() {
    return "the planner needs the model and the layout (layers, hidden size, dp/tp/pp ...), which a PyTorch profiler "
           "trace does not hold";
}

nlohmann::json imported_unknowns() {
    const std::string why = "unknown for an imported run";
    return {{"settings", why + ": a PyTorch profiler trace does not hold the model's settings"},
            {"predicted_memory", why + ": predictions are the engine's"},
            {"mfu", why + ": no FLOP counts or device peak in the trace"},
            {"planner", imported_planner_note()}};
}

}  // namespace us::app
