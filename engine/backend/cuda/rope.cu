// Rotary position embedding, rotate-half: dims i and i + HD/2 of each head of q and k rotate by t * 10000^(-2i/HD);
// the backward rotates by the negative angle. One thread per (row, q/k, head, pair).
#include "engine/backend/cuda/device_types.cuh"
#include "engine/backend/cuda/kernels.h"

namespace us::cuda {

namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void rope_kernel(T* qkv, const float* cos_table, const float* sin_table, const int32_t* positions, int B,
                            int T_, int NH, int HD, float sign) {
    const int half = HD / 2, C = NH * HD;
    const int64_t total = int64_t(B) * T_ * 2 * NH * half;
    for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
         idx += int64_t(gridDim.x) * blockDim.x) {
        const int i = int(idx % half);
        int64_t rest = idx / half;
        const int h = int(rest % NH);
        rest /= NH;
        const int part = int(rest % 2);  // 0: q, 1: k
        const int64_t row = rest / 2;    // b * T + t
        const int t = int(row % T_);
        const int64_t pos = positions ? positions[t] : t;
        T* x = qkv + row * 3 * C + part * C + h * HD;
        const float c = cos_table[pos * half + i], sn = sign * sin_table[pos * half + i];
        const float x1 = ld(x + i), x2 = ld(x + i + half);
        st(x + i, x1 * c - x2 * sn);
        st(x + i + half, x2 * c + x1 * sn);
    }
}

}  // namespace

void rope(void* qkv, DType t, const float* cos_table, const float* sin_table, const int32_t* positions, int B, int T,
          int NH, int HD, float sign, cudaStream_t s) {
    const int64_t total = int64_t(B) * T * 2 * NH * (HD / 2);
    dispatch(t, [&](auto* tag) {
        using X = std::remove_pointer_t<decltype(tag)>;
        rope_kernel<<<grid_for(total, kThreads), kThreads, 0, s>>>(static_cast<X*>(qkv), cos_table, sin_table,
                                                                    positions, B, T, NH, HD, sign);
    });
    US_CUDA_CHECK_LAUNCH();
}

}  // namespace us::cuda
