#include "profiler/analysis/imported_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "profiler/analysis/intervals.h"
#include "profiler/analysis/step_breakdown.h"
#include "profiler/trace/run_info.h"

namespace us::prof {

bool is_imported_run(const TraceStore& store) { return store.rank_count() > 0 && store.is_imported(); }

std::string process_group_name(const RankTrace& rt, int group) {
    // The importer's process groups, read through the run description's deserializer.
    const std::vector<ProcessGroupInfo> groups = imported_run_info(rt).process_groups;
    for (const ProcessGroupInfo& g : groups)
        if (g.group == group) {
            std::string name = g.name.empty() ? fmt::format("group {}", group) : g.name;
            if (!g.kind.empty()) name += " (" + g.kind + ")";
            if (!g.desc.empty() && g.desc != g.name) name += " " + g.desc;
            return name;
        }
    // An imported trace without pg_config (HTA's sampled traces) still has its NCCL kernels: their group is unnamed.
    if (rt.imported() && groups.empty()) return "unnamed group (the trace names no process group)";
    return group < kGroupCount ? std::string(group_kind_name(GroupKind(group))) : fmt::format("group {}", group);
}

ImportedRun imported_run_section(const TraceStore& store, const PipelineStages& pipeline) {
    ImportedRun out;
    nlohmann::json ranks = nlohmann::json::array();
    out.text = "\nImported run (measured; settings unknown, so no predictions):\n";
    for (int r : store.ranks()) {
        const RankTrace& rt = *store.rank(r);
        const std::vector<StepBreakdown> steps = analyze_steps(store, r);
        const StepBreakdown sum = sum_steps(steps);
        // Exposed communication per process group over the steps: the group's collectives (the GPU's NCCL kernels
        // on a GPU rank, the collective ops on a CPU-only one) that no compute covers.
        const Lane comm_lane = rt.has_device_spans() ? Lane::device_comm : Lane::comm;
        std::map<int, std::vector<Interval>> by_group;
        for (const Span& s : rt.lanes[size_t(comm_lane)].spans())
            if (s.kind == SpanKind::comm && !((s.op == OpClass::send || s.op == OpClass::recv) && s.peer >= 0))
                by_group[s.group].emplace_back(s.begin, s.end);
        // Compute: the rank's work lane's ops (kernels on a GPU rank, CPU ops on a CPU-only one).
        std::vector<Interval> compute;
        for (const Span& s : rt.lanes[size_t(rt.work_lane())].spans())
            if (s.kind == SpanKind::op) compute.emplace_back(s.begin, s.end);
        const auto C = union_of(compute, INT64_MIN, INT64_MAX);
        nlohmann::json groups = nlohmann::json::array();
        for (auto& [g, intervals] : by_group) {
            std::vector<Interval> in_steps;
            for (const StepBreakdown& b : steps) {
                const auto m = union_of(intervals, b.begin, b.end);
                in_steps.insert(in_steps.end(), m.begin(), m.end());
            }
            const int64_t m = total_length(in_steps);
            const int64_t exposed = m - intersection_length(in_steps, C);
            groups.push_back({{"group", g},
                              {"name", process_group_name(rt, g)},
                              {"comm_s", double(m) / 1e9},
                              {"exposed_s", double(exposed) / 1e9}});
            out.text += fmt::format("  rank {:<4} {:<40} comm {:>9.3f} ms  exposed {:>9.3f} ms\n", r,
                                    process_group_name(rt, g), double(m) / 1e6, double(exposed) / 1e6);
        }
        const double mean_step = steps.empty() ? 0.0 : sum.wall_s / double(steps.size());
        ranks.push_back({{"rank", r},
                         {"steps", steps.size()},
                         {"idle_s", steps.empty() ? nlohmann::json() : nlohmann::json(sum.idle_s)},
                         {"mean_step_s", steps.empty() ? nlohmann::json() : nlohmann::json(mean_step)},
                         {"work", rt.has_device_spans() ? "device" : "cpu compute"},
                         {"comm_by_process_group", groups}});
        out.text += fmt::format("  rank {:<4} idle {:>9.3f} ms over {} step(s) ({})\n", r, sum.idle_s * 1e3,
                                steps.size(), rt.has_device_spans() ? "device" : "CPU compute");
    }
    out.text += format_pipeline_stages(pipeline);
    out.json = {{"source", "measured"}, {"ranks", ranks}, {"pipeline", pipeline_stages_json(pipeline)}};
    return out;
}

}  // namespace us::prof
