// evaluate(): one layout's memory and step time, and the figures derived from them (evaluate.h); plan_json writes them.
#include "profiler/predict/evaluate.h"

#include <fmt/format.h>

#include "common/core/format.h"
#include "common/settings/gpt_config.h"

namespace us::predict {

PlanResult evaluate(const ModelDesc& m, const ClusterDesc& c, const Layout& l, SharedWork* shared) {
    PlanResult r;
    r.layout = l;
    r.memory = estimate_memory(m, c, l, shared);
    r.fits = r.memory.total() <= c.memory_bytes;
    r.time = estimate_step(m, c, l, shared);
    r.tokens_per_step = double(l.sequences_per_step()) * double(m.seq);
    r.tokens_per_s = r.time.step_s > 0 ? r.tokens_per_step / r.time.step_s : 0;
    r.model_flops_per_token = m.flops_per_token();
    r.mfu = r.tokens_per_s * r.model_flops_per_token / (double(l.world()) * c.peak_flops(l.bf16));
    r.verdict = r.fits ? "fits"
                       : fmt::format("out of memory: {} needed of {} (busiest rank: stage {})",
                                     format_bytes(r.memory.total()), format_bytes(c.memory_bytes), r.memory.stage);
    return r;
}

nlohmann::json plan_json(const ModelDesc& m, const ClusterDesc& c, const PlanResult& r) {
    const Layout& l = r.layout;
    const ParallelLayout& p = l.parallel;
    nlohmann::json mem = nlohmann::json::object();
    for (int i = 0; i < kMemCategoryCount; ++i)
        mem[std::string(kMemCategoryNames[size_t(i)])] =
            r.memory.modelled[size_t(i)] ? nlohmann::json(r.memory.bytes[size_t(i)]) : nlohmann::json();
    const StepPieces& t = r.time;
    return {{"layout",
             {{"dp", p.dp},
              {"tp", p.tp},
              {"sp", p.sp},
              {"pp", p.pp},
              {"pp_schedule", schedule_name(p.pp_schedule)},
              {"pp_chunks", p.pp_chunks},
              {"cp", p.cp},
              {"cp_comm", cp_comm_name(p.cp_comm)},
              {"ep", p.ep},
              {"zero", p.zero},
              {"micro_batch", l.micro_batch},
              {"grad_accum", l.grad_accum},
              {"recompute", recompute_name(l.recompute)},
              {"precision", l.bf16 ? "bf16" : "fp32"},
              {"seq", m.seq},
              {"gpus", l.world()},
              {"flags", l.flags()},
              {"describe", l.describe()}}},
            {"fits", r.fits},
            {"moe_load", l.moe_load_or_uniform()},
            {"moe_load_kind", l.moe_load > 0 ? "given (e.g. measured by a run's router)" : "assumed uniform"},
            {"verdict", r.verdict},
            {"memory_kind", r.memory.kind},
            {"memory_per_gpu_bytes", mem},
            {"memory_reserved_bytes", r.memory.reserved_bytes},
            {"memory_total_bytes", r.memory.total()},
            {"memory_capacity_bytes", c.memory_bytes},
            {"busiest_stage", r.memory.stage},
            {"micro_batches_in_flight", r.memory.micro_batches_in_flight},
            {"params_on_rank", r.memory.params_on_rank},
            {"time_kind", c.calibrated ? "model (calibrated costs)" : "model (datasheet costs, assumed efficiencies)"},
            {"step_time_s", t.step_s},
            {"tokens_per_step", r.tokens_per_step},
            {"tokens_per_s", r.tokens_per_s},
            {"mfu", r.mfu},
            {"model_flops_per_token_formula", r.model_flops_per_token},
            {"time_s",
             {{"gemm", t.gemm_s},
              {"attention", t.attention_s},
              {"other_ops", t.other_ops_s},
              {"recompute", t.recompute_s},
              {"tp_comm", t.tp_comm_s},
              {"cp_comm_exposed", t.cp_comm_exposed_s},
              {"cp_comm_hidden", t.cp_comm_hidden_s},
              {"ep_comm", t.ep_comm_s},
              {"pp_comm", t.pp_comm_s},
              {"bubble", t.bubble_s},
              {"dp_comm_exposed", t.dp_comm_exposed_s},
              {"dp_comm_hidden", t.dp_comm_hidden_s},
              {"optimizer", t.optimizer_s},
              {"overlap_slowdown", t.overlap_slowdown_s},
              {"forward_per_micro_batch", t.forward_s},
              {"backward_per_micro_batch", t.backward_s}}},
            {"busy_s",
             {{"compute", t.compute_busy_s},
              {"intra_node_link", t.link_busy_s[size_t(kLinkIntra)]},
              {"inter_node_link", t.link_busy_s[size_t(kLinkInter)]}}}};
}

}  // namespace us::predict
