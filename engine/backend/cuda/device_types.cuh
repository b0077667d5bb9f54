// Shared by the .cu files: fp32/bf16 loads and stores (bf16 rounds to nearest-even, as the CPU backend's
// f32_to_bf16), dispatch from DType to the storage type, and launch-size helpers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/core/dtype.h"

namespace us::cuda {

using bfloat = __nv_bfloat16;

__device__ __forceinline__ float ld(const float* p) { return *p; }
__device__ __forceinline__ float ld(const bfloat* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void st(float* p, float v) { *p = v; }
__device__ __forceinline__ void st(bfloat* p, float v) { *p = __float2bfloat16_rn(v); }

// Calls fn with a null pointer of the storage type (float or bfloat) that `t` names.
template <typename Fn>
void dispatch(DType t, Fn&& fn) {
    if (t == DType::f32) fn(static_cast<float*>(nullptr));
    else fn(static_cast<bfloat*>(nullptr));
}

template <typename T>
__host__ __device__ constexpr T ceil_div(T a, T b) {
    return (a + b - 1) / b;
}

// Blocks for a grid-stride loop over n elements: enough to fill the GPU, never more than needed.
inline unsigned grid_for(int64_t n, int threads) {
    const int64_t blocks = ceil_div<int64_t>(n, threads);
    return unsigned(blocks < 1 ? 1 : blocks > 65535 ? 65535 : blocks);
}

// A warp's sum (every lane gets it).
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

}  // namespace us::cuda
