// The tensor-core path of the blockwise attention ops (attention_tiles.cu): bf16, head dim 64, chunks and local
// sequences of a multiple of 64 rows. attention_blocks.cu takes it when attention_tiles_apply says so, and keeps its
// plain loops for everything else (fp32 runs, other head dimensions).
#pragma once

#include <cuda_runtime.h>

#include "engine/backend/cuda/kernels.h"

namespace us::cuda {

bool attention_tiles_apply(DType t, int T, int NH, int HD, int chunk, const void* qkv, const void* kv,
                           int64_t kv_stride);
void attention_tiles_forward(float* acc, float* row_max, float* row_sum, const void* qkv, const void* kv,
                             int64_t kv_stride, int B, int T, int NH, int chunk, const ChunkPairs& pairs, float scale,
                             cudaStream_t s);
void attention_tiles_backward(float* dq, float* dkv, const void* qkv, const void* kv, int64_t kv_stride,
                              const void* dout, const float* lse, const float* delta, int B, int T, int NH, int chunk,
                              const ChunkPairs& pairs, float scale, cudaStream_t s);
// One rank's whole causal sequence (Backend::attention_whole_*): k and v read in qkv; out (B,T,C) bf16 and lse
// (B,NH,T) written by the forward; delta (B,NH,T) fp32 (scratch) and dqkv (B,T,3C) bf16 by the backward.
void attention_tiles_whole_forward(void* out, float* lse, const void* qkv, int B, int T, int NH, int chunk,
                                   const ChunkPairs& pairs, float scale, cudaStream_t s);
void attention_tiles_whole_backward(void* dqkv, float* delta, const void* qkv, const void* dout, const void* out,
                                    const float* lse, int B, int T, int NH, int chunk, const ChunkPairs& pairs,
                                    float scale, cudaStream_t s);

}  // namespace us::cuda
