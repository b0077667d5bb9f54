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

}  // namespace us::cuda
