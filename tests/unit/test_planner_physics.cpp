// The planner's predictions never contradict its own physics (issue 32): for every model in assets/models on every
// cluster in assets/clusters at 8 to 16,384 GPUs, every layout the search considers (sampled above a budget, below)
// takes at least the busy time of each resource the model charges (the compute stream, each link level), hides no
// more communication than the compute it overlaps, keeps memory categories non-negative and summing to the total,
// and reaches no more MFU than the GEMM efficiency the cluster file assumes.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "profiler/predict/layout.h"
#include "app/plan/planner.h"
#include "common/core/check.h"
#include "test_util.h"

using namespace us;
using namespace us::plan;
using namespace us::predict;

namespace {

struct Violations {
    int64_t checked = 0, failed = 0;
    std::string first;  // the first layout that broke a rule, and which
    void note(bool ok, const std::string& what, const std::string& where) {
        ++checked;
        if (ok) return;
        if (failed++ == 0) first = where + ": " + what;
    }
};

double max_gemm_eff(const ClusterDesc& c) {
    double e = 0;
    for (const auto& [flops, eff] : c.gemm_efficiency) e = std::max(e, eff);
    return e;
}

void check_layout_physics(const ModelDesc& m, const ClusterDesc& c, const PlanResult& r, Violations& v) {
    const StepPieces& t = r.time;
    const std::string where =
        m.name + " on " + std::to_string(r.layout.world()) + " " + c.name + ": " + r.layout.describe();
    const double eps = 1e-9 * std::max(1.0, t.step_s);
    const double ops = t.gemm_s + t.attention_s + t.other_ops_s + t.recompute_s;
    // Compute beside a hidden transfer runs slower: the cluster's fraction of the hidden time, no more, no less.
    v.note(std::abs(t.overlap_slowdown_s - c.overlap_slowdown * (t.dp_comm_hidden_s + t.cp_comm_hidden_s)) <= eps,
           "compute slowed by other than the cluster's fraction of the hidden transfers", where);
    const double compute = ops + t.overlap_slowdown_s;
    // The compute stream: every op, its slowdown and the optimizer run on it, one after the other.
    v.note(t.step_s + eps >= compute + t.optimizer_s, "step shorter than its compute", where);
    // Hidden communication runs behind compute: never more than the compute there is.
    v.note(t.dp_comm_hidden_s <= ops + eps,
           "data-parallel communication hidden behind compute exceeds the compute (" +
               std::to_string(t.dp_comm_hidden_s) + " s hidden, " + std::to_string(ops) + " s compute)",
           where);
    v.note(t.cp_comm_hidden_s <= t.attention_s + eps, "cp ring hidden beyond the attention it overlaps", where);
    // A group's link carries all its bytes within the step.
    v.note(t.dp_comm_hidden_s + t.dp_comm_exposed_s <= t.step_s + eps,
           "data-parallel traffic longer than the step (" + std::to_string(t.dp_comm_hidden_s + t.dp_comm_exposed_s) +
               " s of traffic, step " + std::to_string(t.step_s) + " s)",
           where);
    v.note(t.cp_comm_hidden_s + t.cp_comm_exposed_s <= t.step_s + eps, "cp traffic longer than the step", where);
    // Every link level's busy time (all groups that use it) fits in the step.
    for (size_t k = 0; k < t.link_busy_s.size(); ++k)
        v.note(t.link_busy_s[k] <= t.step_s + eps,
               "link level " + std::to_string(k) + " busy " + std::to_string(t.link_busy_s[k]) +
                   " s, longer than the step",
               where);
    v.note(t.compute_busy_s <= t.step_s + eps && t.compute_busy_s + eps >= compute, "compute stream busy time", where);
    // Every piece non-negative, and the shown pieces add up to the step.
    for (double p : {t.gemm_s, t.attention_s, t.other_ops_s, t.recompute_s, t.tp_comm_s, t.cp_comm_exposed_s,
                     t.cp_comm_hidden_s, t.ep_comm_s, t.pp_comm_s, t.bubble_s, t.dp_comm_exposed_s, t.dp_comm_hidden_s,
                     t.optimizer_s, t.overlap_slowdown_s})
        v.note(p >= 0, "a negative time piece", where);
    const double sum = compute + t.tp_comm_s + t.cp_comm_exposed_s + t.ep_comm_s + t.pp_comm_s + t.bubble_s +
                       t.dp_comm_exposed_s + t.optimizer_s;
    v.note(std::abs(sum - t.step_s) <= 1e-6 * t.step_s, "pieces do not add up to the step", where);
    // Memory: every category non-negative, the categories and the reserve make the total.
    for (int64_t b : r.memory.bytes) v.note(b >= 0, "a negative memory category", where);
    v.note(r.memory.categories_total() + r.memory.reserved_bytes == r.memory.total(), "memory does not add up", where);
    // MFU: the model's FLOPs at the step time can not beat the best GEMM efficiency assumed.
    v.note(r.mfu > 0 && r.mfu <= max_gemm_eff(c) + 1e-9,
           "MFU " + std::to_string(r.mfu) + " above the assumed GEMM efficiency " + std::to_string(max_gemm_eff(c)),
           where);
}

}  // namespace

TEST_CASE("planner physics: no layout the search considers beats its own resources", "[planner]") {
    // Each search's layouts all when there are at most kPerSearch, else one in n / kPerSearch (odd, so the sample
    // walks across the innermost choices: recomputation, schedule, micro-batch, ZeRO) in the search's own order:
    // about 135 searches x 100 layouts, within a minute on two cores.
    constexpr int64_t kPerSearch = 100;
    Violations v;
    int64_t skipped = 0;
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::string> models;
    for (const auto& f : std::filesystem::directory_iterator(models_dir()))
        if (f.path().extension() == ".json") models.push_back(f.path().string());
    std::sort(models.begin(), models.end());
    REQUIRE(models.size() >= 9);
    for (const std::string& model_file : models) {
        const ModelDesc m = load_model(model_file);
        for (const std::string& cluster_name : known_clusters()) {
            const ClusterDesc c = load_cluster(cluster_name);
            for (int64_t gpus : {8, 64, 512, 4096, 16384}) {
                if (gpus > c.total_gpus()) continue;
                SearchOptions o;
                o.gpus = gpus;
                // About 1M tokens per step, at least one sequence per GPU.
                o.global_batch_sequences = std::max<int64_t>(gpus, (int64_t(1) << 20) / m.seq);
                // Count the layouts first (a search that evaluates only the first), then walk about kPerSearch of them
                // at an odd stride.
                o.sample_stride = INT64_MAX;
                const SearchResult count = search(m, c, o);
                const int64_t n = count.considered + count.sampled_out;
                o.sample_stride = std::max<int64_t>(1, n / kPerSearch) | 1;
                const SearchResult s = search(m, c, o);
                skipped += s.sampled_out;
                for (const PlanResult& r : s.ranked) {
                    check_layout_physics(m, c, r, v);
                    // and the rules the engine and `ultrascope plan` share (settings_rules.cpp) accept it
                    std::string refused;
                    try {
                        check_layout(m, c, r.layout, gpus);
                    } catch (const us::UserError& e) {
                        refused = e.what();
                    }
                    v.note(refused.empty(), "a layout the rules refuse: " + refused,
                           m.name + " on " + std::to_string(gpus) + " " + c.name + ": " + r.layout.describe());
                }
            }
        }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    INFO("checked " << v.checked << " rules, " << v.failed << " broken; first: " << v.first << "; " << skipped
                    << " layouts sampled out; " << seconds << " s");
    CHECK(v.checked > 200000);
    CHECK(v.failed == 0);
}
