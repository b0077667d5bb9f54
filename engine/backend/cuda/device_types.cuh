// Shared by the .cu files: fp32/bf16 loads and stores (bf16 rounds to nearest-even, as the CPU backend's
// f32_to_bf16), dispatch from DType to the storage type, and launch-size helpers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "engine/backend/cuda/cuda_check.h"
#include "common/core/dtype.h"

namespace us::cuda {

using bfloat = __nv_bfloat16;

__device__ __forceinline__ float ld(const float* p) { return *p; }
__device__ __forceinline__ float ld(const bfloat* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void st(float* p, float v) { *p = v; }
__device__ __forceinline__ void st(bfloat* p, float v) { *p = __float2bfloat16_rn(v); }

// Calls fn with a null pointer of the storage type (float or bfloat) that `t` names.
template <typename Fn>
void dispatch(DType t, Fn&& fn) {
    if (t == DType::f32)
        fn(static_cast<float*>(nullptr));
    else
        fn(static_cast<bfloat*>(nullptr));
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

// 16-byte vectors: kVec<T> elements of T (8 bf16 or 4 fp32) moved by one load or store instruction. Memory-bound
// kernels take this path when every pointer is 16-byte aligned and the element count divides (vectorizable());
// the values, and the order of every sum, are the same as in the scalar path.
template <typename T>
constexpr int kVec = 16 / int(sizeof(T));

template <typename T>
struct alignas(16) Vec {
    T v[kVec<T>];
};

template <typename T>
__device__ __forceinline__ void ld_vec(float (&out)[kVec<T>], const T* p) {
    const Vec<T> x = *reinterpret_cast<const Vec<T>*>(p);
#pragma unroll
    for (int k = 0; k < kVec<T>; ++k) out[k] = ld(&x.v[k]);
}

template <typename T>
__device__ __forceinline__ void st_vec(T* p, const float (&in)[kVec<T>]) {
    Vec<T> x;
#pragma unroll
    for (int k = 0; k < kVec<T>; ++k) st(&x.v[k], in[k]);
    *reinterpret_cast<Vec<T>*>(p) = x;
}

// Eight elements, whatever T: one 16-byte access for bf16, two for fp32 (so mixed-type kernels share one path).
constexpr int kPack = 8;

template <typename T>
__device__ __forceinline__ void ld8(float (&out)[kPack], const T* p) {
    constexpr int n = kVec<T>;
#pragma unroll
    for (int h = 0; h < kPack / n; ++h) {
        float part[n];
        ld_vec<T>(part, p + h * n);
#pragma unroll
        for (int k = 0; k < n; ++k) out[h * n + k] = part[k];
    }
}

template <typename T>
__device__ __forceinline__ void st8(T* p, const float (&in)[kPack]) {
    constexpr int n = kVec<T>;
#pragma unroll
    for (int h = 0; h < kPack / n; ++h) {
        float part[n];
#pragma unroll
        for (int k = 0; k < n; ++k) part[k] = in[h * n + k];
        st_vec<T>(p + h * n, part);
    }
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// True when n elements split into whole vectors of `vec` and every pointer is 16-byte aligned.
template <typename... P>
bool vectorizable(int64_t n, int vec, const P*... ptrs) {
    return n % vec == 0 && (aligned16(ptrs) && ...);
}

// Each elementwise kernel walks its elements with a grid-stride loop, kPack at a time when kPacked (16-byte
// loads and stores: vectorizable() said so) or one at a time otherwise. The arithmetic is the same either way.
template <bool kPacked>
struct Stride {
    static constexpr int kStep = kPacked ? kPack : 1;
    __device__ static int64_t first() { return (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * kStep; }
    __device__ static int64_t step() { return int64_t(gridDim.x) * blockDim.x * kStep; }
};

template <typename T>
__device__ __forceinline__ void load(float (&v)[kPack], const T* p, bool packed) {
    if (packed)
        ld8(v, p);
    else
        v[0] = ld(p);
}
template <typename T>
__device__ __forceinline__ void store(T* p, const float (&v)[kPack], bool packed) {
    if (packed)
        st8(p, v);
    else
        st(p, v[0]);
}

// Launches kernel<true> (packed) or kernel<false> over n elements.
template <typename Launch>
void launch_packed(bool packed, int64_t n, int threads, Launch&& launch) {
    const int64_t units = packed ? n / kPack : n;
    const unsigned blocks = grid_for(units, threads);
    if (packed)
        launch(std::true_type{}, blocks);
    else
        launch(std::false_type{}, blocks);
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

// A block's max or sum of one value per thread, in a fixed order (so runs repeat bit for bit); every thread gets it.
// `shared` holds blockDim.x / 32 floats; blockDim.x is a multiple of 32.
template <bool kMax>
__device__ float block_reduce(float v, float* shared) {
    v = kMax ? warp_max(v) : warp_sum(v);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < int(blockDim.x / 32) ? shared[lane] : (kMax ? -INFINITY : 0.0f);
        v = kMax ? warp_max(v) : warp_sum(v);
        if (lane == 0) shared[0] = v;
    }
    __syncthreads();
    const float result = shared[0];
    __syncthreads();
    return result;
}

}  // namespace us::cuda
