// A predicted rank's metadata (predicted_metadata.h).
#include "app/plan/predicted_metadata.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "common/core/check.h"
#include "common/settings/config.h"

namespace us::plan {

namespace {

// The ultrascope-train config of an engine model's layout (the report predicts its memory from it, as for a run);
// null for other models.
nlohmann::json engine_config(const predict::ModelDesc& m, const predict::Layout& l) {
    if (m.family != predict::ModelFamily::engine_gpt) return nullptr;
    return predict::engine_settings(m, l).to_json();
}

}  // namespace

prof::RankMetadata predicted_rank_metadata(const predict::ModelDesc& m, const predict::ClusterDesc& c,
                                           const predict::PlanResult& plan, int64_t gpus, const predict::StepModel& sm,
                                           int stage, const std::string& memory_kind, bool detailed) {
    const predict::Layout& l = plan.layout;
    const ParallelLayout& p = l.parallel;
    prof::RankMetadata meta;
    meta.rank = stage;
    meta.world_size = p.pp;
    meta.coords = {.dp = 0, .pp = stage, .tp = 0, .cp = 0, .ep = 0};
    meta.grid = {.dp = p.dp, .pp = p.pp, .tp = p.tp, .cp = p.cp, .ep = p.ep};
    meta.host = "predicted";
    meta.device = c.gpu_name.empty() ? c.name : c.gpu_name;
    meta.backend = "predicted";
    meta.device_peak_gflops = c.peak_flops(l.bf16) / 1e9;
    meta.device_peak_source = "cluster description " + c.name;
    meta.tokens_per_step = plan.tokens_per_step;
    meta.params = m.num_params();
    meta.predicted = nlohmann::json{
        {"model", m.name},
        {"cluster", c.name},
        {"gpus", gpus},
        {"layout", l.describe()},
        {"flags", l.flags()},
        {"step_s", sm.step_s},
        {"model_flops_per_token", plan.model_flops_per_token},
        {"shape",
         {{"dp", p.dp},
          {"tp", p.tp},
          {"pp", p.pp},
          {"cp", p.cp},
          {"ep", p.ep},
          {"sp", p.sp},
          {"zero", p.zero},
          {"pp_schedule", schedule_name(p.pp_schedule)},
          {"pp_chunks", p.pp > 1 ? p.pp_chunks : 1},
          {"batch", l.micro_batch},
          {"grad_accum", l.grad_accum},
          {"seq", m.seq},
          {"layers", m.layers}}},
        {"memory_kind", memory_kind},
        {"represents", fmt::format("pipeline stage {}: the rank with tp, cp, dp and ep index 0 ({} ranks do the same)",
                                   stage, gpus / std::max(1, p.pp))},
        {"detail", detailed ? "layer by layer" : "one span per kind of work per action"}};
    if (nlohmann::json cfg = engine_config(m, l); !cfg.is_null()) meta.settings = cfg;
    return meta;
}

}  // namespace us::plan
