// Weight initialisation, GPT-2 style: matrices and the embedding N(0, 0.02), the two residual projections
// (attn.c_proj, mlp.c_proj) N(0, 0.02/sqrt(2L)), biases 0, LayerNorm weights 1. Each tensor draws from its own
// stream, seeded by the run's seed and the tensor's name, so every layout (one rank, pipeline stages, shards)
// starts from bitwise the same weights.
#pragma once

#include <cstdint>

#include "engine/model/gpt_config.h"
#include "engine/model/param_layout.h"

namespace us {

// Writes the tensor's initial values (fp32, numel of them) to out.
void init_param_tensor(const ParamTensor& tensor, const GPTConfig& cfg, uint64_t seed, float* out);

}  // namespace us
