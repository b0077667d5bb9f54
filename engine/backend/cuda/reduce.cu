// Sum and sum of squares in double, deterministic: a fixed grid of blocks, each summing a fixed grid-stride
// subset in thread order and then in a fixed tree, then one block adding the block sums in order.
#include "engine/backend/cuda/device_types.cuh"
#include "engine/backend/cuda/kernels.h"

namespace us::cuda {

namespace {

constexpr int kBlocks = 512;
constexpr int kThreads = 256;

__device__ double block_sum(double v, double* shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
        __syncthreads();
    }
    return shared[0];
}

// kPacked: 16-byte loads (8 bf16 or 4 fp32 per thread and step) when x is aligned and n divides; the scalar loop
// otherwise. Each thread's order is fixed either way, so a run is bitwise repeatable.
template <typename T, bool kSquares, bool kPacked>
__global__ void partial_sums_kernel(double* partials, const T* x, int64_t n) {
    __shared__ double shared[kThreads];
    double acc = 0.0;
    const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
    if constexpr (kPacked) {
        constexpr int w = kVec<T>;
        for (int64_t i = first; i < n / w; i += stride) {
            float v[w];
            ld_vec<T>(v, x + i * w);
#pragma unroll
            for (int k = 0; k < w; ++k) acc += kSquares ? double(v[k]) * v[k] : double(v[k]);
        }
    } else {
        for (int64_t i = first; i < n; i += stride) {
            const double v = ld(x + i);
            acc += kSquares ? v * v : v;
        }
    }
    const double total = block_sum(acc, shared);
    if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void finish_kernel(double* result, const double* partials, int count, bool accumulate) {
    __shared__ double shared[kThreads];
    double acc = 0.0;
    for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
    const double total = block_sum(acc, shared);
    if (threadIdx.x == 0) *result = accumulate ? *result + total : total;
}

}  // namespace

size_t reduce_partials_doubles() { return kBlocks; }

void sum(double* result, const void* x, DType t, int64_t n, bool squares, double* partials, cudaStream_t s,
         bool accumulate) {
    dispatch(t, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        const T* in = static_cast<const T*>(x);
        const bool packed = vectorizable(n, kVec<T>, in);
        if (squares && packed)
            partial_sums_kernel<T, true, true><<<kBlocks, kThreads, 0, s>>>(partials, in, n);
        else if (squares)
            partial_sums_kernel<T, true, false><<<kBlocks, kThreads, 0, s>>>(partials, in, n);
        else if (packed)
            partial_sums_kernel<T, false, true><<<kBlocks, kThreads, 0, s>>>(partials, in, n);
        else
            partial_sums_kernel<T, false, false><<<kBlocks, kThreads, 0, s>>>(partials, in, n);
    });
    US_CUDA_CHECK_LAUNCH();
    finish_kernel<<<1, kThreads, 0, s>>>(result, partials, kBlocks, accumulate);
    US_CUDA_CHECK_LAUNCH();
}

}  // namespace us::cuda
