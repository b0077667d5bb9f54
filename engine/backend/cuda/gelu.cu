// GeLU with the tanh approximation, as GPT-2 and nn.GELU(approximate="tanh").
#include "engine/backend/cuda/device_types.cuh"
#include "engine/backend/cuda/kernels.h"

namespace us::cuda {

namespace {

constexpr int kThreads = 256;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCoeff = 0.044715f;

template <typename T>
__global__ void gelu_forward_kernel(T* out, const T* inp, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const float v = ld(inp + i);
        st(out + i, 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + kCoeff * v * v * v))));
    }
}

template <typename T>
__global__ void gelu_backward_kernel(T* dinp, const T* inp, const T* dout, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const float v = ld(inp + i);
        const float th = tanhf(kSqrt2OverPi * (v + kCoeff * v * v * v));
        const float sech2 = 1.0f - th * th;
        const float grad = 0.5f * (1.0f + th) + 0.5f * v * sech2 * kSqrt2OverPi * (1.0f + 3.0f * kCoeff * v * v);
        st(dinp + i, grad * ld(dout + i));
    }
}

}  // namespace

void gelu_forward(void* out, const void* inp, DType t, int64_t n, cudaStream_t s) {
    dispatch(t, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        gelu_forward_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(static_cast<T*>(out), static_cast<const T*>(inp), n);
    });
    US_CUDA_CHECK_LAUNCH();
}

void gelu_backward(void* dinp, const void* inp, const void* dout, DType t, int64_t n, cudaStream_t s) {
    dispatch(t, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        gelu_backward_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(static_cast<T*>(dinp), static_cast<const T*>(inp),
                                                                         static_cast<const T*>(dout), n);
    });
    US_CUDA_CHECK_LAUNCH();
}

}  // namespace us::cuda
