// The cross-setting rules (settings_rules.h), in the order the engine has always checked them.
#include "common/settings/settings_rules.h"

#include <algorithm>
#include <climits>

#include "common/core/check.h"
#include "common/schedule/pipeline_schedule.h"

namespace us {

void check_setting_rules(const TrainConfig& c, const RuleContext& context) {
    US_CHECK_INPUT(c.batch > 0, "--batch must be positive (got {})", c.batch);
    US_CHECK_INPUT(c.grad_accum > 0, "--grad-accum must be positive (got {})", c.grad_accum);
    US_CHECK_INPUT(!c.fp32_grad_accum || c.precision == Precision::bf16,
                   "--fp32-grad-accum needs --precision bf16 (fp32 runs already accumulate in fp32)");
    const ParallelLayout& p = c.parallel;
    p.check();  // the rules of the layout alone: degrees, sp with tp, ep dividing dp, the ZeRO stage ...
    // Tensor and sequence parallelism: heads (and with them the hidden size and the MLP) split over the tp group;
    // the vocabulary is padded to a multiple of tp instead of refused.
    US_CHECK_INPUT(c.model.heads % p.tp == 0,
                   "--heads {} cannot be split over --tp {}: tensor parallelism gives each rank heads/tp whole heads; "
                   "use a tp that divides {} (or more heads)",
                   c.model.heads, p.tp, c.model.heads);
    US_CHECK_INPUT(!p.sp || c.model.seq % p.tp == 0,
                   "--seq {} cannot be split over --tp {} for --sp: sequence parallelism gives each rank seq/tp "
                   "positions; use a sequence length that divides by {}",
                   c.model.seq, p.tp, p.tp);
    // Context parallelism: the sequence in 2 cp (zigzag) or cp (contiguous) equal chunks; with sequence parallelism
    // a rank's positions split further over tp.
    // One collective carries at most 2^31 - 1 elements (MPI's and NCCL's counts): the all-gather moves every rank's
    // keys and values of a micro-batch at once, B seq 2 h / tp of them.
    const int64_t gathered = int64_t(c.batch) * c.model.seq * 2 * (c.model.hidden / std::max(1, p.tp));
    US_CHECK_INPUT(p.cp == 1 || p.cp_comm != CpComm::allgather || gathered <= int64_t(INT_MAX),
                   "--cp-comm allgather would gather {} elements a layer (--batch {} x --seq {} x 2 x --hidden {} / "
                   "--tp {}), more than one collective carries (2^31 - 1): use a smaller --batch, a larger --tp, or "
                   "--cp-comm ring",
                   gathered, c.batch, c.model.seq, c.model.hidden, p.tp);
    const int cp_chunks = p.cp_balance == CpBalance::zigzag ? 2 * p.cp : p.cp;
    US_CHECK_INPUT(p.cp == 1 || c.model.seq % cp_chunks == 0,
                   "--seq {} cannot be split over --cp {} ({}): it needs {} equal chunks; use a sequence length that "
                   "divides by {}",
                   c.model.seq, p.cp, cp_balance_name(p.cp_balance), cp_chunks, cp_chunks);
    US_CHECK_INPUT(!p.sp || p.cp == 1 || (c.model.seq / p.cp) % p.tp == 0,
                   "--sp with --cp {}: each rank's {} positions must split over --tp {}", p.cp, c.model.seq / p.cp,
                   p.tp);
    // Mixture of experts and expert parallelism: ep shares the data-parallel ranks (as Megatron and torchtitan do).
    US_CHECK_INPUT(c.moe_capacity_factor >= 0, "--moe-capacity-factor must not be negative (got {}); 0 is dropless",
                   c.moe_capacity_factor);
    US_CHECK_INPUT(c.moe_aux_loss_coef >= 0, "--moe-aux-loss-coef must not be negative (got {})", c.moe_aux_loss_coef);
    US_CHECK_INPUT(p.ep == 1 || c.model.is_moe(),
                   "--ep {} needs experts to spread: add --moe-experts E (a multiple of {}); the model has no experts",
                   p.ep, p.ep);
    US_CHECK_INPUT(!c.model.is_moe() || c.model.moe_experts % p.ep == 0,
                   "--moe-experts {} cannot be split over --ep {}: each expert-parallel rank holds E/ep whole experts",
                   c.model.moe_experts, p.ep);
    US_CHECK_INPUT(
        !c.model.is_moe() || p.pp_schedule != PipelineSchedule::zb1,
        "--pp-schedule zb1 with mixture-of-experts blocks is not supported (their expert weight gradients are "
        "not split into a W pass): use 1f1b, afab or interleaved");
    US_CHECK_INPUT(c.runtime.comm_progress == "thread" || c.runtime.comm_progress == "poll",
                   "unknown --comm-progress '{}': expected thread or poll", c.runtime.comm_progress);
    US_CHECK_INPUT(c.device == "cpu" || c.device == "cuda", "unknown --device '{}': expected cpu or cuda", c.device);
    // cuDNN's fused attention is a GPU library for 16-bit inputs over one rank's whole sequence.
    US_CHECK_INPUT(c.attention != Attention::cudnn || c.device == "cuda",
                   "--attention cudnn runs cuDNN's fused attention on a GPU: add --device cuda, or use --attention "
                   "flash (the same blockwise attention) on the CPU");
    US_CHECK_INPUT(c.attention != Attention::cudnn || c.precision == Precision::bf16,
                   "--attention cudnn needs --precision bf16 (cuDNN's fused attention takes 16-bit q, k and v): add "
                   "--precision bf16, or use --attention flash in fp32");
    US_CHECK_INPUT(c.attention != Attention::cudnn || p.cp == 1,
                   "--attention cudnn runs one rank's whole sequence; with --cp {} the ring's blocks take the flash "
                   "kernels: use --attention flash",
                   p.cp);
    // Pipelines
    validate_schedule_shape(p.pp_schedule, PipelineShape{p.pp, c.grad_accum, p.pp_chunks});
    const int stages = p.pp * p.pp_chunks;
    US_CHECK_INPUT(c.model.layers % stages == 0 || (context.uneven_stages_ok && c.model.layers >= 2 * stages),
                   "--layers {} cannot be split evenly over pp {} x {} chunk(s) = {} pipeline stages: use a multiple "
                   "of {} layers (each stage takes layers/{}; the first also the embedding, the last the head)",
                   c.model.layers, p.pp, p.pp_chunks, stages, stages, stages);
    US_CHECK_INPUT(p.pp_schedule != PipelineSchedule::zb1 || c.recompute != Recompute::full,
                   "--pp-schedule zb1 keeps each block's activations until its W pass; it cannot run with --recompute "
                   "full (use none or selective)");
    US_CHECK_INPUT(p.pp_schedule != PipelineSchedule::zb1 || !c.fp32_grad_accum,
                   "--pp-schedule zb1 with --fp32-grad-accum is not supported: drop one of them");
}

std::string setting_rules_problem(const TrainConfig& cfg, const RuleContext& context) {
    try {
        check_setting_rules(cfg, context);
    } catch (const UserError& e) {
        return e.what();
    }
    return {};
}

}  // namespace us
