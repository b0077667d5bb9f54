// What the forward pass keeps for backward, per block and for the embedding and head, in each recompute mode, as
// bytes: the engine's own per-layer activation breakdown. The engine carves its activations by it
// (engine/model/activations.h), the analysis predicts from it (profiler/predict/predict_memory.cpp), docs/memory.md
// prints it, and the tests check the allocator's measured bytes against it. Pure arithmetic on shapes: it lives
// beneath the engine and the profiler so that both use this one definition.
//
// Per block, with e = bytes per activation element (4 fp32, 2 bf16), N = B*T:
//   ln1 (N,C), qkv (N,3C), probs (B,NH,T,T), atty (N,C), residual2 (N,C), ln2 (N,C), fch (N,4C),
//   fch_gelu (N,4C), output (N,C), and 4 fp32 LayerNorm statistics of (N).
//   none:      e*(16*N*C + B*NH*T*T) + 16*N      selective: e*16*N*C + 16*N      full: e*N*C
// In full mode the other tensors live in one shared working block that exists during a block's forward and
// again during its backward (one layer's worth, probs included).
//
// Tensor parallelism divides what lives between a column-parallel and a row-parallel linear (qkv, probs, atty,
// fch, fch_gelu) by tp; the rest (the residual stream, the LayerNorm inputs and outputs) stays (N,C) on every
// rank, or (N/tp,C) with sequence parallelism, which therefore divides everything by tp:
//   tp:        e*(4*N*C + 12*N*C/tp + B*NH*T*T/tp) + 16*N
//   tp + sp:   (e*(16*N*C + B*NH*T*T) + 16*N) / tp
//
// An MoE block keeps, instead of fch and fch_gelu, the router's probabilities (N,E) fp32 and each token's K choices,
// gates and rows (N,K) (i32, fp32, i32); the expert rows it routes (their inputs, hidden and GeLU activations, and
// their outputs back on the token's side) depend on the routing and live in allocations of their own (moe.h):
// N K C + 2 N K F + N K C elements when nothing is dropped and the experts are on this rank.
//
// Context parallelism runs every layer on the rank's T = seq/cp positions, and its ring attention never keeps the
// probabilities: each block keeps the softmax's log-sum-exp per query row and head instead, 4*B*NH*T bytes (in
// every recompute mode but full), and backward recomputes the scores block by block.
#pragma once

#include <cstdint>
#include <vector>

#include "common/core/dtype.h"
#include "common/core/recompute.h"

namespace us {

// The shape of one micro-batch's activations on a rank. NH and C are the model's; V is the vocabulary columns
// this rank's head computes (the padded vocabulary / tp).
struct ActivationShape {
    int B = 1, T = 1, C = 1, NH = 1, V = 256;  // T: the sequence rows on this rank (seq / cp)
    int tp = 1;
    int cp = 1;
    bool flash = false;  // --attention flash: blockwise attention keeps the log-sum-exp, not the probabilities
    int E = 0, K = 0;    // mixture of experts: experts and choices per token (MoE blocks)
    bool sp = false;     // sequence parallelism: the residual stream holds rows() = N/tp rows
    DType dtype = DType::f32;
    int64_t N() const { return int64_t(B) * T; }          // token rows of the micro-batch
    int64_t rows() const { return sp ? N() / tp : N(); }  // rows of the residual stream on this rank
    int heads() const { return NH / tp; }                 // attention heads on this rank
    int64_t Ca() const { return C / tp; }                 // their width (heads x head dim)
    int64_t F() const { return 4 * int64_t(C) / tp; }     // this rank's share of the MLP's 4C
    int64_t loss_tokens() const { return N() * cp; }      // the micro-batch's tokens over the cp group
};

enum class BlockPart { saved, working };

struct ActivationEntry {
    const char* name;
    DType dtype;
    int64_t numel;
};

// The tensors of a block that `part` holds in `mode`, in allocation order (moe: an MoE block's).
std::vector<ActivationEntry> block_entries(const ActivationShape& s, Recompute mode, BlockPart part, bool moe = false);
int64_t entries_bytes(const std::vector<ActivationEntry>& entries);
int64_t block_saved_bytes(const ActivationShape& s, Recompute mode, bool moe = false);
int64_t block_working_bytes(const ActivationShape& s, Recompute mode, bool moe = false);  // 0 unless mode is full

// bf16 runs on one tensor-parallel rank fuse the cross-entropy (Backend::crossentropy_fused): the head's GEMM
// writes bf16 logits, which become the bf16 gradient in place during the forward. fp32 runs and vocabulary-parallel
// heads keep fp32 logits (and in bf16 a separate bf16 dlogits for backward).
bool fused_head_loss(const ActivationShape& s);
// Whether one rank's whole-sequence blockwise attention (--attention flash, cp 1) runs fused on the device: the
// CUDA backend's tensor-core tiles (bf16, head dim 64, a sequence of a multiple of 64 rows) write the output, the
// log-sum-exp and the gradients themselves, so a backward holds only its deltas (B,NH,T) fp32 as temporaries
// instead of fp32 q, k and v gradients beside them (Backend::attention_whole_*).
bool whole_attention_fused(const ActivationShape& s, bool cuda);
// The head keeps the final LayerNorm output (rows,C) and statistics, the logits (N,V) (fp32, or bf16 when
// fused_head_loss) and per-token losses (N); under tensor parallelism also the vocabulary-parallel softmax
// statistics (N,3) fp32.
int64_t head_saved_bytes(const ActivationShape& s);
int64_t embedding_saved_bytes(const ActivationShape& s);  // the embedding output (rows,C)
// Backward's activation gradients: dresidual (rows,C), dC (N,C), dqkv (N,3Ca), dfch (N,F); with sequence
// parallelism also the gathered output gradient (N,C) and the reduce-scattered input gradient (rows,C); in bf16
// without the fused loss a bf16 copy of dlogits (N,V) for the head's GEMMs.
int64_t backward_temporaries_bytes(const ActivationShape& s, bool has_head);
// With sequence parallelism a forward keeps one (N,C) buffer for the all-gathered LayerNorm outputs and the
// row-parallel outputs before their reduce-scatter (temporaries); 0 otherwise.
int64_t forward_temporaries_bytes(const ActivationShape& s);
// What a split backward (B of a zero-bubble pipeline) keeps per block until W: the four weight GEMMs' output
// gradients, (N,C) + (N,F) + (N,C) + (N,3Ca).
int64_t deferred_block_bytes(const ActivationShape& s);

}  // namespace us
