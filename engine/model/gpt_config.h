// The shape of the GPT and how it is trained numerically (precision, recomputation). Parallel layout lives in
// train/config.h; this is only what a single model replica needs to know.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/core/dtype.h"

namespace us {

struct GPTConfig {
    int vocab = 256;   // V
    int hidden = 256;  // C (h in docs/formulas.md)
    int layers = 4;    // L
    int heads = 4;     // NH
    int seq = 128;     // T

    int head_dim() const { return hidden / heads; }
    // N = h*v + L*(12h^2 + 13h) + 2h (tied embeddings, RoPE: no position table).
    int64_t num_params() const;
    // Throws UserError naming the offending value and what would be valid.
    void validate() const;
};

enum class Precision { fp32, bf16 };
enum class Recompute { none, selective, full };

std::string_view precision_name(Precision p);
std::string_view recompute_name(Recompute r);
Precision parse_precision(std::string_view text);  // UserError when unknown
Recompute parse_recompute(std::string_view text);  // UserError when unknown

// Storage type of params, grads and activations for a precision (master weights and moments are always fp32).
inline DType compute_dtype(Precision p) { return p == Precision::bf16 ? DType::bf16 : DType::f32; }

}  // namespace us
