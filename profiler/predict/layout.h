// One way to lay a model out on GPUs: the parallel layout (common/settings/parallel_layout.h, the engine's own type)
// and the training settings beside it that change memory and time. The names and meanings are ultrascope-train's
// (common/settings/config.h), so `ultrascope plan --dp 2 --tp 2 ...` evaluates exactly what `ultrascope run --dp 2
// --tp 2 ...` would run.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "profiler/predict/cluster_desc.h"
#include "profiler/predict/model_desc.h"
#include "common/core/recompute.h"
#include "common/settings/parallel_layout.h"

namespace us {
struct TrainConfig;
}

namespace us::predict {

struct Layout {
    ParallelLayout parallel;
    int micro_batch = 1;  // sequences per micro-batch (--batch)
    int grad_accum = 1;   // micro-batches per step (--grad-accum)
    Recompute recompute = Recompute::none;
    bool bf16 = true;
    bool fp32_grad_accum = false;
    bool flash = false;  // --attention flash
    // Mixture of experts under expert parallelism: the busiest ep rank's expert rows over the uniform share (its
    // experts' share of the router's choices x ep, the worst layer's). 0: not given, routing assumed uniform (1).
    // `ultrascope plan --moe-load F`, e.g. from a run's report (experts.layers[].share).
    double moe_load = 0;
    double moe_load_or_uniform() const { return moe_load > 0 ? moe_load : 1.0; }

    int world() const { return parallel.world(); }
    int64_t sequences_per_step() const { return int64_t(parallel.dp) * micro_batch * grad_accum; }
    std::string describe() const;  // "dp 2 tp 2 (sp) pp 2 1f1b ..., ZeRO-1, mb 1 x 8, recompute selective, bf16"
    // The ultrascope-train flags that run it: every setting of layout_setting_keys() that applies (the table's
    // `applies`: the schedule only with pp > 1, chunks with interleaved, sp with tp > 1, the cp balance with
    // cp > 1; ep always, a layout knowing no model), written by the settings table (common/settings/settings_schema.h).
    std::string flags() const;
    std::vector<std::string> flag_words() const;  // the same, one word each
};

// The trainer settings (settings_schema.h keys) a layout holds: layout_from_config reads them, apply_layout writes
// them, flags() writes their flags.
const std::vector<std::string_view>& layout_setting_keys();
Layout layout_from_config(const TrainConfig& cfg);
// Sets layout_setting_keys() of cfg from the layout; the other settings stay.
void apply_layout(const Layout& layout, TrainConfig& cfg);
// The trainer config an engine model laid out this way runs: the model's shape, then the layout. For other models
// the shape is what the rules look at (heads, seq, layers, experts).
TrainConfig engine_settings(const ModelDesc& model, const Layout& layout);

// Throws UserError naming the field when `layout` cannot run `model` on `gpus` GPUs of `cluster`: more GPUs than the
// cluster holds, kv heads tp cannot split, and every rule of the engine's (common/settings/settings_rules.h, on
// engine_settings(model, layout)): degrees that do not divide heads, layers, the sequence or the experts, ZeRO-2/3
// with pipelines, zero-bubble with full recomputation, MoE or fp32 gradient accumulation, ...
void check_layout(const ModelDesc& model, const ClusterDesc& cluster, const Layout& layout, int64_t gpus);

}  // namespace us::predict
