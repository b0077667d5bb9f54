#include "app/plan/layout.h"

#include <fmt/format.h>

#include "common/core/check.h"
#include "common/schedule/pipeline_schedule.h"
#include "common/settings/config.h"
#include "common/settings/settings_rules.h"
#include "common/settings/settings_schema.h"

namespace us::plan {

std::string Layout::describe() const {
    std::string s = fmt::format("dp {} tp {}{} pp {}", dp, tp, sp ? " (sp)" : "", pp);
    if (pp > 1) s += fmt::format(" {}{}", pp_schedule, pp_chunks > 1 ? fmt::format(" x{}", pp_chunks) : "");
    if (cp > 1) s += fmt::format(" cp {}{}", cp, cp_comm == "allgather" ? " (all-gather)" : "");
    if (ep > 1) s += fmt::format(" ep {}", ep);
    s += fmt::format(", ZeRO-{}, mb {} x {}, recompute {}, {}", zero, micro_batch, grad_accum, recompute,
                     bf16 ? "bf16" : "fp32");
    return s;
}

const std::vector<std::string_view>& layout_setting_keys() {
    static const std::vector<std::string_view> keys = {
        "dp",        "tp",         "pp",         "cp",        "ep",        "sp",        "pp_schedule",     "pp_chunks",
        "zero",      "batch",      "grad_accum", "recompute", "precision", "attention", "fp32_grad_accum", "overlap",
        "bucket_mb", "cp_balance", "cp_comm"};
    return keys;
}

std::vector<std::string> Layout::flag_words() const {
    TrainConfig c;
    apply_layout(*this, c);
    // The settings that do something here (no schedule without a pipeline, ...). A layout has no model, so ep,
    // which applies with experts, is always written.
    std::vector<std::string_view> keys;
    for (std::string_view k : layout_setting_keys())
        if (k == "ep" || setting_applies(setting(k), c)) keys.push_back(k);
    return flags_for_keys(c, keys);
}

std::string Layout::flags() const {
    std::string s;
    for (const std::string& w : flag_words()) s += (s.empty() ? "" : " ") + w;
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
    l.cp_balance = p.cp_balance, l.cp_comm = p.cp_comm;
    return l;
}

void apply_layout(const Layout& l, TrainConfig& cfg) {
    ParallelConfig& p = cfg.parallel;
    p.dp = l.dp, p.tp = l.tp, p.pp = l.pp, p.cp = l.cp, p.ep = l.ep, p.sp = l.sp;
    p.pp_schedule = l.pp_schedule, p.pp_chunks = l.pp_chunks, p.zero = l.zero;
    cfg.batch = l.micro_batch, cfg.grad_accum = l.grad_accum;
    cfg.recompute = parse_recompute(l.recompute);
    cfg.precision = l.bf16 ? Precision::bf16 : Precision::fp32;
    cfg.fp32_grad_accum = l.fp32_grad_accum;
    cfg.attention = l.flash ? Attention::flash : Attention::naive;
    p.overlap = l.overlap;
    p.bucket_mb = l.bucket_mb;
    p.cp_balance = l.cp_balance, p.cp_comm = l.cp_comm;
}

TrainConfig engine_settings(const ModelDesc& m, const Layout& l) {
    TrainConfig c;
    c.model.vocab = int(m.vocab), c.model.hidden = int(m.hidden), c.model.layers = int(m.layers);
    c.model.heads = int(m.heads), c.model.seq = int(m.seq);
    if (m.is_moe())
        c.model.moe_experts = int(m.moe_experts), c.model.moe_topk = int(m.moe_topk),
        c.model.moe_every = int(m.moe_every);
    if (m.moe_capacity_factor > 0) c.moe_capacity_factor = m.moe_capacity_factor;
    apply_layout(l, c);
    return c;
}

void check_layout(const ModelDesc& m, const ClusterDesc& c, const Layout& l, int64_t gpus) {
    US_CHECK_INPUT(gpus <= c.total_gpus(),
                   "--gpus {} is more than cluster '{}' holds ({} nodes x {} GPUs = {}): edit 'nodes' in its file or "
                   "ask for fewer",
                   gpus, c.name, c.nodes, c.gpus_per_node, c.total_gpus());
    for (auto [name, v] : {std::pair{"dp", l.dp}, {"tp", l.tp}, {"pp", l.pp}, {"cp", l.cp}, {"ep", l.ep}})
        US_CHECK_INPUT(v >= 1, "--{} must be at least 1 (got {})", name, v);
    US_CHECK_INPUT(l.world() == gpus,
                   "the layout uses dp {} x tp {} x pp {} x cp {} = {} GPUs, but --gpus is {}: make the product equal",
                   l.dp, l.tp, l.pp, l.cp, l.world(), gpus);
    // The engine's rules, on the config this layout of this model makes (the same messages as the trainer's).
    check_setting_rules(engine_settings(m, l), RuleContext{.uneven_stages_ok = m.family != ModelFamily::engine_gpt});
    // What the engine's config cannot express: grouped-query attention's key/value heads.
    US_CHECK_INPUT(m.kv() % l.tp == 0 || l.tp % m.kv() == 0,
                   "--tp {} and the model's {} key/value heads: one must divide the other", l.tp, m.kv());
}

}  // namespace us::plan
