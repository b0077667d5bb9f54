// Weight initialisation, GPT-2 style: matrices and the embedding N(0, 0.02), the two residual projections
// (attn.c_proj, mlp.c_proj) N(0, 0.02/sqrt(2L)), biases 0, LayerNorm weights 1. Each tensor draws from its own
// stream, seeded by the run's seed and the tensor's name, so every layout (one rank, pipeline stages, shards)
// starts from bitwise the same weights. A tensor-parallel shard is cut from the whole tensor's values.
#pragma once

#include <cstdint>

#include "common/settings/gpt_config.h"
#include "engine/model/param_layout.h"

namespace us {

// Writes the initial values of the rank's shard of the tensor (fp32, tensor.numel of them) to out.
void init_param_tensor(const ParamTensor& tensor, const TpPlacement& tp, const GPTConfig& cfg, uint64_t seed,
                       float* out);

}  // namespace us
