// The CUDA kernels of the backend, as host-callable launchers: one .cu file per op family, each launching on the
// stream it is given. Only plain types cross this boundary (pointers, DType, sizes), so the .cu files need no
// engine header beyond dtype.h. Storage is fp32 or bf16 as the CPU backend's; arithmetic is fp32 (double for the
// reductions that feed the loss and the gradient norm), rounded once on store. Every reduction has a fixed order,
// so a run is bitwise repeatable on one GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "common/core/dtype.h"

namespace us::cuda {

// ---- elementwise (elementwise.cu)
void residual(void* out, const void* a, const void* b, DType t, int64_t n, cudaStream_t s);
void convert(void* dst, DType dst_type, const void* src, DType src_type, int64_t n, cudaStream_t s);
void accumulate(void* acc, DType acc_type, const void* x, DType x_type, int64_t n, cudaStream_t s);
void scale(void* p, DType t, int64_t n, float factor, cudaStream_t s);
void add_bias(void* out, DType out_type, const void* bias, DType bias_type, int N, int OC, cudaStream_t s);
// dbias += column sums of dout, in a fixed order: row chunks summed into `partials` (fp32, bias_partials_floats),
// then the chunks in order.
size_t bias_partials_floats(int N, int OC);
void bias_backward(void* dbias, DType dbias_type, const void* dout, DType dout_type, int N, int OC, float* partials,
                   cudaStream_t s);

// ---- reductions (reduce.cu): sum or sum of squares in double, deterministic; the result lands in *result
// (device memory), or is added to it (accumulate); `partials` holds reduce_partials_doubles() doubles.
size_t reduce_partials_doubles();
void sum(double* result, const void* x, DType t, int64_t n, bool squares, double* partials, cudaStream_t s,
         bool accumulate = false);

// ---- GeLU, tanh approximation (gelu.cu)
void gelu_forward(void* out, const void* inp, DType t, int64_t n, cudaStream_t s);
void gelu_backward(void* dinp, const void* inp, const void* dout, DType t, int64_t n, cudaStream_t s);

// ---- LayerNorm, eps 1e-5 (layernorm.cu). The parameter gradients go through fp32 row-chunk partials
// (layernorm_partials_floats) summed in order.
void layernorm_forward(void* out, float* mean, float* rstd, const void* inp, const void* weight, const void* bias,
                       DType t, int N, int C, cudaStream_t s);
size_t layernorm_partials_floats(int N, int C);
void layernorm_backward(void* dinp, void* dweight, void* dbias, const void* dout, const void* inp, const void* weight,
                        const float* mean, const float* rstd, DType t, int N, int C, float* partials, cudaStream_t s);

// ---- RoPE, rotate-half, in place on the q and k thirds of qkv (rope.cu); sign -1 rotates back (backward).
// cos/sin tables are (rows, HD/2) fp32 on the device, indexed by positions[t] (device, (T) i32) or by t when null.
void rope(void* qkv, DType t, const float* cos_table, const float* sin_table, const int32_t* positions, int B, int T,
          int NH, int HD, float sign, cudaStream_t s);

// ---- blockwise attention with an online softmax (attention_blocks.cu; backend.h's AttentionBlockArgs). One thread
// block per query row (forward, dq) or key row (dk, dv), each walking its chunk pairs in order: plain and
// deterministic (no atomics), not tuned. The pairs travel by value.
struct ChunkPairs {
    static constexpr int kMax = 8;
    int count = 0;
    int q_chunk[kMax] = {}, k_chunk[kMax] = {};
    bool causal[kMax] = {};
};
// kv_stride: elements between kv's rows (2C for a packed block, 3C when kv points into qkv).
void attention_block_forward(float* acc, float* row_max, float* row_sum, const void* qkv, const void* kv,
                             int64_t kv_stride, DType t, int B, int T, int NH, int HD, int chunk,
                             const ChunkPairs& pairs, cudaStream_t s);
void attention_block_finish(void* out, DType t, float* lse, const float* acc, const float* row_max,
                            const float* row_sum, int B, int T, int NH, int HD, cudaStream_t s);
void attention_block_delta(float* delta, const void* dout, const void* out, DType t, int B, int T, int NH, int HD,
                           cudaStream_t s);
void attention_block_backward(float* dq, float* dkv, const void* qkv, const void* kv, int64_t kv_stride,
                              const void* dout, DType t, const float* lse, const float* delta, int B, int T, int NH,
                              int HD, int chunk, const ChunkPairs& pairs, cudaStream_t s);
void attention_block_pack_kv(void* kv, const void* qkv, DType t, int B, int T, int C, cudaStream_t s);
void attention_block_store_grads(void* dqkv, DType t, const float* dq, const float* dkv, int B, int T, int C,
                                 cudaStream_t s);

// ---- attention pieces around the cuBLAS products (attention.cu). Scores are fp32 (rows, T) with rows = NH*T
// for one sequence; row r is query position r % T.
// P = causal softmax of the scores (already scaled); entries above the diagonal are written as zero.
void causal_softmax(void* probs, DType probs_type, const float* scores, int rows, int T, cudaStream_t s);
// dS = scale * P * (dP - rowsum(P * dP)) on the causal part, zero above it.
void causal_softmax_backward(void* dscores, DType dscores_type, const void* probs, DType probs_type,
                             const float* dprobs, int rows, int T, float scale, cudaStream_t s);

// ---- mixture of experts (moe.cu): routing and its backward one thread per token; dispatch, combine and row
// reordering one block per row (each output written by one block: deterministic).
void moe_route(float* probs, int32_t* topk, float* gates, int N, int E, int K, cudaStream_t s);
void moe_route_backward(float* dlogits, const float* probs, const int32_t* topk, const float* gates,
                        const float* dgates, const float* aux, int N, int E, int K, int tokens_per_seq, cudaStream_t s);
void moe_dispatch(void* out, const void* x, DType t, const int32_t* rows, int N, int K, int C, cudaStream_t s);
void moe_dispatch_backward(void* dx, const void* dout, DType t, const int32_t* rows, int N, int K, int C,
                           cudaStream_t s);
void moe_combine(void* out, const void* y, DType t, const int32_t* rows, const float* gates, int N, int K, int C,
                 cudaStream_t s);
void moe_combine_backward(void* dy, float* dgates, const void* dout, const void* y, DType t, const int32_t* rows,
                          const float* gates, int N, int K, int C, cudaStream_t s);
void gather_rows(void* dst, const void* src, DType t, const int32_t* index, int M, int C, cudaStream_t s);

// ---- token embedding (embedding.cu). The backward sorts the tokens (stable radix sort, so equal tokens keep
// their order) and sums each token's rows in ascending position: the CPU backend's order, bitwise.
void embedding_forward(void* out, const int32_t* tokens, const void* wte, DType t, int N, int C, int vocab_begin, int V,
                       cudaStream_t s);
size_t embedding_backward_workspace_bytes(int N);
void embedding_backward(void* dwte, const void* dout, const int32_t* tokens, DType t, int N, int C, int vocab_begin,
                        int V, void* workspace, size_t workspace_bytes, cudaStream_t s);

// ---- softmax cross-entropy over fp32 logits, in place (crossentropy.cu)
void crossentropy_forward(float* losses, float* logits, const int32_t* targets, int N, int V, cudaStream_t s);
void crossentropy_backward(void* dlogits, DType t, const float* probs, const int32_t* targets, float dloss, int N,
                           int V, int vocab_begin, cudaStream_t s);
// bf16 logits (N,V): losses, and the row turned into probs - onehot in place (backend_ops.h's crossentropy_fused).
void crossentropy_fused(float* losses, void* logits, const int32_t* targets, int N, int V, cudaStream_t s);
// The vocabulary-parallel steps (backend.h): per-row max of the valid columns; [sum of exp(z - max), target logit];
// losses and probabilities.
void crossentropy_local_max(float* rowmax, const float* logits, int N, int V, int valid, cudaStream_t s);
void crossentropy_local_sums(float* sums, const float* logits, const float* rowmax, const int32_t* targets, int N,
                             int V, int valid, int vocab_begin, cudaStream_t s);
void crossentropy_finish(float* losses, float* logits, const float* rowmax, const float* sums, int N, int V, int valid,
                         cudaStream_t s);

// ---- AdamW (adamw.cu): the CPU backend's operations in its order; the host computes the scalars as it does.
struct AdamWLaunch {
    void* params = nullptr;  // fp32, or bf16 when master is set
    float* master = nullptr;
    const void* grads = nullptr;
    DType grads_type = DType::f32;
    float* m = nullptr;
    float* v = nullptr;
    int64_t n = 0;
    float step_size = 0, bc2_sqrt = 1, decay = 1, beta1 = 0, one_minus_beta1 = 1, beta2 = 0, one_minus_beta2 = 1,
          eps = 0, grad_scale = 1;
};
void adamw(const AdamWLaunch& a, cudaStream_t s);

}  // namespace us::cuda
