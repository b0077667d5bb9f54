// Tensors and views of what the forward pass keeps for backward, carved out of allocations in the layout
// activation_bytes.h defines (the per-block table, the head, backward's scratch, a split backward's deferred
// gradients).
#pragma once

#include <cstdint>
#include <vector>

#include "common/core/activation_bytes.h"
#include "common/core/allocator.h"
#include "common/settings/gpt_config.h"

namespace us {

// Tensors of one block. A tensor absent in a mode is empty.
struct BlockActs {
    Tensor ln1_mean, ln1_rstd, ln2_mean, ln2_rstd;  // (N) fp32
    Tensor ln1;                                     // (N,C)
    Tensor qkv;                                     // (N,3C) q and k after RoPE
    Tensor probs;                                   // (B,NH,T,T) softmax output
    Tensor lse;        // (B,NH,T) fp32: ring attention's log-sum-exp (context parallelism), instead of probs
    Tensor atty;       // (N,C) attention output before the projection
    Tensor residual2;  // (N,C) input + attention branch
    Tensor ln2;        // (N,C)
    Tensor fch;        // (N,4C) before GeLU
    Tensor fch_gelu;   // (N,4C)
    Tensor output;     // (N,C) the block's output: the next block's input
    // MoE blocks, instead of fch and fch_gelu:
    Tensor moe_probs;  // (N,E) fp32: the router's logits, then probabilities
    Tensor moe_topk;   // (N,K) i32: each token's experts
    Tensor moe_gates;  // (N,K) fp32
    Tensor moe_rows;   // (N,K) i32: each choice's row in the expert-ordered buffer, -1 when dropped
};

// Views into `storage` laid out as block_entries(s, mode, part, moe); fills only the tensors the part holds.
void carve_block(BlockActs& acts, const Allocation& storage, const ActivationShape& s, Recompute mode, BlockPart part,
                 bool moe = false);

// Backward's activation gradients, one set per backward pass (temporaries): dres is the gradient of the residual
// stream flowing down through the blocks; dC, dqkv and dfch are reused by every block. With sequence parallelism
// dfull holds an all-gathered output gradient (or re-gathered LayerNorm output) and dln a reduce-scattered input
// gradient.
struct BackwardScratch {
    Allocation storage;
    Tensor dres;       // (R,C)
    Tensor dC;         // (N,C): a LayerNorm output's partial gradient; its first N*Ca elements also d(atty)
    Tensor dqkv;       // (N,3Ca)
    Tensor dfch;       // (N,F)
    Tensor dfull;      // (N,C) sequence parallelism only
    Tensor dln;        // (R,C) sequence parallelism only
    Tensor dlogits16;  // (N,Vr) bf16 copy of dlogits for the head GEMMs (bf16 runs only)
};
// Views into `storage` (backward_temporaries_bytes(s, has_head) bytes), which the scratch then owns.
BackwardScratch carve_backward_scratch(Allocation storage, const ActivationShape& s, bool has_head);

// A block's weight-GEMM output gradients, kept from B to W of a split backward (deferred_block_bytes).
struct DeferredGrads {
    Tensor dout_fcproj;  // (N,C)  d(block output), all rows
    Tensor dfch;         // (N,F)  d(c_fc output)
    Tensor dres2;        // (N,C)  d(residual2), all rows
    Tensor dqkv;         // (N,3Ca) d(c_attn output)
};
DeferredGrads view_deferred(const Allocation& storage, const ActivationShape& s);

}  // namespace us
