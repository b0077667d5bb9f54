// Rotary position embedding, rotate-half: dims i and i + HD/2 of each head of q and k rotate by t * 10000^(-2i/HD);
// the backward rotates by the negative angle.
#include "engine/backend/cuda/device_types.cuh"
#include "engine/backend/cuda/kernels.h"

namespace us::cuda {

namespace {

constexpr int kThreads = 256;

// One block per row (b, t): its threads walk the row's (q/k, head, pair) triples, adjacent threads adjacent pairs,
// so the loads coalesce and no thread divides 64-bit indices (the grid-stride version spent 46 us per call on that).
template <typename T>
__global__ void rope_kernel(T* qkv, const float* cos_table, const float* sin_table, const int32_t* positions, int T_,
                            int NH, int HD, float sign) {
    const int half = HD / 2, C = NH * HD;
    const int64_t row = blockIdx.x;  // b * T + t
    const int t = int(row % T_);
    const int64_t pos = positions ? positions[t] : t;
    const float* cos_row = cos_table + pos * half;
    const float* sin_row = sin_table + pos * half;
    T* base = qkv + row * 3 * C;  // q heads, then k heads: head hh of the 2*NH starts at hh * HD
    for (int j = threadIdx.x; j < 2 * NH * half; j += blockDim.x) {
        const int i = j % half;
        T* x = base + (j / half) * HD;
        const float c = cos_row[i], sn = sign * sin_row[i];
        const float x1 = ld(x + i), x2 = ld(x + i + half);
        st(x + i, x1 * c - x2 * sn);
        st(x + i + half, x2 * c + x1 * sn);
    }
}

}  // namespace

void rope(void* qkv, DType t, const float* cos_table, const float* sin_table, const int32_t* positions, int B, int T,
          int NH, int HD, float sign, cudaStream_t s) {
    const int64_t rows = int64_t(B) * T;
    if (rows == 0) return;
    dispatch(t, [&](auto* tag) {
        using X = std::remove_pointer_t<decltype(tag)>;
        rope_kernel<<<unsigned(rows), kThreads, 0, s>>>(static_cast<X*>(qkv), cos_table, sin_table, positions, T, NH,
                                                        HD, sign);
    });
    US_CUDA_CHECK_LAUNCH();
}

}  // namespace us::cuda
