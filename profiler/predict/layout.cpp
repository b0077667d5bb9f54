#include "profiler/predict/layout.h"

#include <fmt/format.h>

#include "common/core/check.h"
#include "common/schedule/pipeline_schedule.h"
#include "common/settings/config.h"
#include "common/settings/settings_rules.h"
#include "common/settings/settings_schema.h"

namespace us::predict {

std::string Layout::describe() const {
    return parallel.describe() + fmt::format(", mb {} x {}, recompute {}, {}", micro_batch, grad_accum,
                                             recompute_name(recompute), bf16 ? "bf16" : "fp32");
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
    l.parallel = cfg.parallel;
    l.micro_batch = cfg.batch, l.grad_accum = cfg.grad_accum;
    l.recompute = cfg.recompute;
    l.bf16 = cfg.precision == Precision::bf16;
    l.fp32_grad_accum = cfg.fp32_grad_accum;
    l.flash = attention_blockwise(cfg.attention);
    return l;
}

void apply_layout(const Layout& l, TrainConfig& cfg) {
    cfg.parallel = l.parallel;
    cfg.batch = l.micro_batch, cfg.grad_accum = l.grad_accum;
    cfg.recompute = l.recompute;
    cfg.precision = l.bf16 ? Precision::bf16 : Precision::fp32;
    cfg.fp32_grad_accum = l.fp32_grad_accum;
    cfg.attention = l.flash ? Attention::flash : Attention::naive;
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
    const ParallelLayout& p = l.parallel;
    p.check();
    US_CHECK_INPUT(p.world() == gpus,
                   "the layout uses dp {} x tp {} x pp {} x cp {} = {} GPUs, but --gpus is {}: make the product equal",
                   p.dp, p.tp, p.pp, p.cp, p.world(), gpus);
    // The engine's rules, on the config this layout of this model makes (the same messages as the trainer's).
    check_setting_rules(engine_settings(m, l), RuleContext{.uneven_stages_ok = m.family != ModelFamily::engine_gpt});
    // What the engine's config cannot express: grouped-query attention's key/value heads.
    US_CHECK_INPUT(m.kv() % p.tp == 0 || p.tp % m.kv() == 0,
                   "--tp {} and the model's {} key/value heads: one must divide the other", p.tp, m.kv());
}

}  // namespace us::predict
