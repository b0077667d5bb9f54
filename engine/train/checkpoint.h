// Checkpoints: safetensors with nanoGPT tensor names and nn.Linear [out, in] layout, fp32 weights (the master
// weights in bf16 runs), the AdamW moments as optimizer.exp_avg.<name> / optimizer.exp_avg_sq.<name>, and in the
// metadata the model shape, precision, seed and steps taken (which fixes the data position). docs/checkpoints.md
// describes the format. Written atomically; a file of another shape is refused with the difference named.
#pragma once

#include <string>
#include <vector>

#include "engine/model/param_layout.h"
#include "common/settings/config.h"
#include "engine/parallel/train_state.h"

namespace us {

struct CheckpointInfo {
    int steps_done = 0;
    uint64_t seed = 0;
    bool has_optimizer_state = false;
};

// Collective when the state is sharded: every rank calls it; only the one with `write` set writes the file.
// `layouts`: the blocks' layout, and for an MoE model the experts' (every tensor of each goes in).
void save_checkpoint(const std::string& path, const TrainConfig& cfg, const std::vector<const ParamLayout*>& layouts,
                     TrainState& state, int steps_done, bool write = true);
inline void save_checkpoint(const std::string& path, const TrainConfig& cfg, const ParamLayout& layout,
                            TrainState& state, int steps_done, bool write = true) {
    save_checkpoint(path, cfg, std::vector<const ParamLayout*>{&layout}, state, steps_done, write);
}

// Loads into `state`. UserError for a missing, corrupt or mismatched file.
CheckpointInfo load_checkpoint(const std::string& path, const TrainConfig& cfg,
                               const std::vector<const ParamLayout*>& layouts, TrainState& state);
inline CheckpointInfo load_checkpoint(const std::string& path, const TrainConfig& cfg, const ParamLayout& layout,
                                      TrainState& state) {
    return load_checkpoint(path, cfg, std::vector<const ParamLayout*>{&layout}, state);
}

}  // namespace us
