// AdamW in the CPU backend's order of operations (torch.optim.AdamW's single-tensor form), so roundings agree.
#include "engine/backend/cuda/device_types.cuh"
#include "engine/backend/cuda/kernels.h"

namespace us::cuda {

namespace {

constexpr int kThreads = 256;

template <typename G>
__global__ void adamw_kernel(AdamWLaunch a, const G* grads, float* w32, bfloat* w16) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < a.n; i += int64_t(gridDim.x) * blockDim.x) {
        const float grad = ld(grads + i) * a.grad_scale;
        float w = w32[i] * a.decay;
        const float m = a.m[i] * a.beta1 + grad * a.one_minus_beta1;
        const float v = a.v[i] * a.beta2 + a.one_minus_beta2 * (grad * grad);
        a.m[i] = m;
        a.v[i] = v;
        w = w + -a.step_size * (m / (sqrtf(v) / a.bc2_sqrt + a.eps));
        w32[i] = w;
        if (w16) st(w16 + i, w);
    }
}

}  // namespace

void adamw(const AdamWLaunch& a, cudaStream_t s) {
    if (a.n == 0) return;
    float* w32 = a.master ? a.master : static_cast<float*>(a.params);
    bfloat* w16 = a.master ? static_cast<bfloat*>(a.params) : nullptr;
    dispatch(a.grads_type, [&](auto* tag) {
        using G = std::remove_pointer_t<decltype(tag)>;
        adamw_kernel<<<grid_for(a.n, kThreads), kThreads, 0, s>>>(a, static_cast<const G*>(a.grads), w32, w16);
    });
    US_CUDA_CHECK_LAUNCH();
}

}  // namespace us::cuda
