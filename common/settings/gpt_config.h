// The shape of the GPT and how it is trained numerically (precision, recomputation). Parallel layout lives in
// train/config.h; this is only what a single model replica needs to know.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/core/dtype.h"
#include "common/core/recompute.h"

namespace us {

struct GPTConfig {
    int vocab = 256;   // V
    int hidden = 256;  // C (h in docs/formulas.md)
    int layers = 4;    // L
    int heads = 4;     // NH
    int seq = 128;     // T
    // Mixture of experts: every moe_every-th block (blocks moe_every - 1, 2 moe_every - 1, ...) replaces its MLP by
    // moe_experts experts (each the 4h GeLU MLP with biases) and a bias-free router h -> E, each token going to its
    // moe_topk best experts. moe_experts = 0: the dense model.
    int moe_experts = 0;  // E
    int moe_topk = 2;     // K
    int moe_every = 1;    // M

    int head_dim() const { return hidden / heads; }
    bool is_moe() const { return moe_experts > 0; }
    bool is_moe_layer(int layer) const { return is_moe() && layer % moe_every == moe_every - 1; }
    int moe_layers() const;
    // N = h*v + L*(12h^2 + 13h) + 2h (tied embeddings, RoPE: no position table); an MoE block has
    // 4h^2 + 8h + h*E + E*(8h^2 + 5h) instead of 12h^2 + 13h.
    int64_t num_params() const;
    // The parameters a token uses: K experts of each MoE block instead of E (what FLOPs per token count).
    int64_t active_params() const;
    // Throws UserError naming the offending value and what would be valid.
    void validate() const;
};

enum class Precision { fp32, bf16 };
// How attention runs: naive stores the (B, heads, s, s) probabilities for backward; flash runs it blockwise with an
// online softmax (the ring attention's kernels, on one rank's whole sequence), keeps only the log-sum-exp per row
// and recomputes the scores in backward, so the s^2 term leaves the activations. cudnn is flash's model (the same
// saved log-sum-exp, the same memory) with cuDNN's fused attention as the GPU kernels (docs/gpu.md).
enum class Attention { naive, flash, cudnn };
// Whether attention keeps only a log-sum-exp per row (flash and cudnn): the model, the memory model and the planner
// treat both alike; only the CUDA backend's kernels differ.
inline bool attention_blockwise(Attention a) { return a != Attention::naive; }

std::string_view precision_name(Precision p);
std::string_view recompute_name(Recompute r);
Precision parse_precision(std::string_view text);  // UserError when unknown
Recompute parse_recompute(std::string_view text);  // UserError when unknown
std::string_view attention_name(Attention a);
Attention parse_attention(std::string_view text);  // UserError when unknown

// Storage type of params, grads and activations for a precision (master weights and moments are always fp32).
inline DType compute_dtype(Precision p) { return p == Precision::bf16 ? DType::bf16 : DType::f32; }

}  // namespace us
