// GeLU with the tanh approximation, as GPT-2 and nn.GELU(approximate="tanh").
#include "engine/backend/cuda/device_types.cuh"
#include "engine/backend/cuda/kernels.h"

namespace us::cuda {

namespace {

constexpr int kThreads = 256;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCoeff = 0.044715f;

__device__ __forceinline__ float gelu(float v) {
    return 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kCoeff * v * v * v)));
}

__device__ __forceinline__ float gelu_grad(float v) {
    const float th = tanhf(kSqrt2OverPi * (v + kCoeff * v * v * v));
    const float sech2 = 1.0f - th * th;
    return 0.5f * (1.0f + th) + 0.5f * v * sech2 * kSqrt2OverPi * (1.0f + 3.0f * kCoeff * v * v);
}

template <bool kPacked, typename T>
__global__ void gelu_forward_kernel(T* out, const T* inp, int64_t n) {
    using S = Stride<kPacked>;
    for (int64_t i = S::first(); i < n; i += S::step()) {
        float v[kPack];
        load(v, inp + i, kPacked);
#pragma unroll
        for (int k = 0; k < S::kStep; ++k) v[k] = gelu(v[k]);
        store(out + i, v, kPacked);
    }
}

template <bool kPacked, typename T>
__global__ void gelu_backward_kernel(T* dinp, const T* inp, const T* dout, int64_t n) {
    using S = Stride<kPacked>;
    for (int64_t i = S::first(); i < n; i += S::step()) {
        float v[kPack], d[kPack];
        load(v, inp + i, kPacked), load(d, dout + i, kPacked);
#pragma unroll
        for (int k = 0; k < S::kStep; ++k) v[k] = gelu_grad(v[k]) * d[k];
        store(dinp + i, v, kPacked);
    }
}

}  // namespace

void gelu_forward(void* out, const void* inp, DType t, int64_t n, cudaStream_t s) {
    dispatch(t, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        launch_packed(vectorizable(n, kPack, out, inp), n, kThreads, [&](auto packed, unsigned blocks) {
            gelu_forward_kernel<decltype(packed)::value>
                <<<blocks, kThreads, 0, s>>>(static_cast<T*>(out), static_cast<const T*>(inp), n);
        });
    });
    US_CUDA_CHECK_LAUNCH();
}

void gelu_backward(void* dinp, const void* inp, const void* dout, DType t, int64_t n, cudaStream_t s) {
    dispatch(t, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        launch_packed(vectorizable(n, kPack, dinp, inp, dout), n, kThreads, [&](auto packed, unsigned blocks) {
            gelu_backward_kernel<decltype(packed)::value><<<blocks, kThreads, 0, s>>>(
                static_cast<T*>(dinp), static_cast<const T*>(inp), static_cast<const T*>(dout), n);
        });
    });
    US_CUDA_CHECK_LAUNCH();
}

}  // namespace us::cuda
