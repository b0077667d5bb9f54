#include "app/plan/layout.h"

#include <fmt/format.h>

#include "common/core/check.h"
#include "common/schedule/pipeline_schedule.h"
#include "common/settings/config.h"

namespace us::plan {

std::string Layout::describe() const {
    std::string s = fmt::format("dp {} tp {}{} pp {}", dp, tp, sp ? " (sp)" : "", pp);
    if (pp > 1) s += fmt::format(" {}{}", pp_schedule, pp_chunks > 1 ? fmt::format(" x{}", pp_chunks) : "");
    if (cp > 1) s += fmt::format(" cp {}", cp);
    if (ep > 1) s += fmt::format(" ep {}", ep);
    s += fmt::format(", ZeRO-{}, mb {} x {}, recompute {}, {}", zero, micro_batch, grad_accum, recompute,
                     bf16 ? "bf16" : "fp32");
    return s;
}

std::string Layout::flags() const {
    std::string s = fmt::format("--dp {} --tp {} --pp {} --cp {} --ep {} --zero {} --batch {} --grad-accum {} "
                                "--recompute {} --precision {}",
                                dp, tp, pp, cp, ep, zero, micro_batch, grad_accum, recompute, bf16 ? "bf16" : "fp32");
    if (sp) s += " --sp";
    if (pp > 1) s += fmt::format(" --pp-schedule {} --pp-chunks {}", pp_schedule, pp_chunks);
    if (flash) s += " --attention flash";
    return s;
}

Layout layout_from_config(const TrainConfig& cfg) {
    Layout l;
    const ParallelConfig& p = cfg.parallel;
    l.dp = p.dp, l.tp = p.tp, l.pp = p.pp, l.cp = p.cp, l.ep = p.ep, l.sp = p.sp;
    l.pp_schedule = p.pp_schedule, l.pp_chunks = p.pp_chunks, l.zero = p.zero;
    l.micro_batch = cfg.batch, l.grad_accum = cfg.grad_accum;
    l.recompute = std::string(recompute_name(cfg.recompute));
    l.bf16 = cfg.precision == Precision::bf16;
    l.fp32_grad_accum = cfg.fp32_grad_accum;
    l.flash = cfg.attention == Attention::flash;
    l.overlap = p.overlap;
    l.bucket_mb = p.bucket_mb;
    l.cp_balance = p.cp_balance;
    return l;
}

void check_layout(const ModelDesc& m, const ClusterDesc& c, const Layout& l, int64_t gpus) {
    for (auto [name, v] : {std::pair{"dp", l.dp}, {"tp", l.tp}, {"pp", l.pp}, {"cp", l.cp}, {"ep", l.ep}})
        US_CHECK_INPUT(v >= 1, "--{} must be at least 1 (got {})", name, v);
    US_CHECK_INPUT(l.micro_batch >= 1, "--batch must be at least 1 (got {})", l.micro_batch);
    US_CHECK_INPUT(l.grad_accum >= 1, "--grad-accum must be at least 1 (got {})", l.grad_accum);
    US_CHECK_INPUT(gpus <= c.total_gpus(),
                   "--gpus {} is more than cluster '{}' holds ({} nodes x {} GPUs = {}): edit 'nodes' in its file or "
                   "ask for fewer",
                   gpus, c.name, c.nodes, c.gpus_per_node, c.total_gpus());
    US_CHECK_INPUT(l.world() == gpus,
                   "the layout uses dp {} x tp {} x pp {} x cp {} = {} GPUs, but --gpus is {}: make the product equal",
                   l.dp, l.tp, l.pp, l.cp, l.world(), gpus);
    US_CHECK_INPUT(m.heads % l.tp == 0, "--tp {} does not divide the model's heads ({}): each rank needs whole heads",
                   l.tp, m.heads);
    US_CHECK_INPUT(m.kv() % l.tp == 0 || l.tp % m.kv() == 0,
                   "--tp {} and the model's {} key/value heads: one must divide the other", l.tp, m.kv());
    US_CHECK_INPUT(!l.sp || l.tp > 1, "--sp needs --tp 2 or more");
    US_CHECK_INPUT(!l.sp || (m.seq / l.cp) % l.tp == 0, "--sp: the sequence {} (over cp {}) does not split over --tp {}",
                   m.seq, l.cp, l.tp);
    const int cp_chunks = l.cp_balance == "zigzag" ? 2 * l.cp : l.cp;
    US_CHECK_INPUT(l.cp == 1 || m.seq % cp_chunks == 0,
                   "--cp {}: the sequence {} does not split into {} equal chunks ({})", l.cp, m.seq, cp_chunks,
                   l.cp_balance);
    US_CHECK_INPUT(l.ep == 1 || m.is_moe(), "--ep {}: the model has no experts", l.ep);
    US_CHECK_INPUT(l.dp % l.ep == 0, "--ep {} must divide --dp {} (expert parallelism shares the data-parallel ranks)",
                   l.ep, l.dp);
    US_CHECK_INPUT(!m.is_moe() || m.moe_experts % l.ep == 0, "--ep {} does not divide the model's {} experts", l.ep,
                   m.moe_experts);
    US_CHECK_INPUT(l.zero >= 0 && l.zero <= 3, "--zero must be 0, 1, 2 or 3 (got {})", l.zero);
    US_CHECK_INPUT(l.pp == 1 || l.zero <= 1, "--zero {} with --pp {}: ZeRO-2 and 3 run without pipelines here "
                                             "(use --zero 1 or --pp 1)", l.zero, l.pp);
    const int stages = l.pp * (l.pp_schedule == "interleaved" ? l.pp_chunks : 1);
    // The engine cuts equal stages; other models may have uneven ones (the busiest is planned for), but every
    // stage needs a layer.
    const bool uneven_ok = m.family != ModelFamily::engine_gpt;
    US_CHECK_INPUT(m.layers % stages == 0 || (uneven_ok && m.layers >= 2 * stages),
                   "--pp {}{}: the model's {} layers do not split into {} equal stages", l.pp,
                   l.pp_schedule == "interleaved" ? fmt::format(" x --pp-chunks {}", l.pp_chunks) : "", m.layers,
                   stages);
    US_CHECK_INPUT(l.recompute == "none" || l.recompute == "selective" || l.recompute == "full",
                   "--recompute must be none, selective or full (got '{}')", l.recompute);
    US_CHECK_INPUT(l.pp_schedule != "zb1" || l.recompute != "full",
                   "--pp-schedule zb1 with --recompute full: the zero-bubble split needs the saved activations");
    if (l.pp > 1) validate_schedule_shape(l.pp_schedule, PipelineShape{l.pp, l.grad_accum, l.pp_chunks});
}

}  // namespace us::plan
