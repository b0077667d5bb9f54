// The elementwise parts of attention; the four products per direction run on cuBLAS (cuda_backend.cpp). Scores
// arrive scaled, in fp32; one warp per (head, query) row, causal: row t sees keys 0..t.
#include "engine/backend/cuda/device_types.cuh"
#include "engine/backend/cuda/kernels.h"

namespace us::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;

template <typename P>
__global__ void causal_softmax_kernel(P* probs, const float* scores, int rows, int T) {
    const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    const int t = row % T;
    const float* s = scores + int64_t(row) * T;
    P* p = probs + int64_t(row) * T;
    float m = -INFINITY;
    for (int j = lane; j <= t; j += 32) m = fmaxf(m, s[j]);
    m = warp_max(m);
    float sum = 0.0f;
    for (int j = lane; j <= t; j += 32) sum += expf(s[j] - m);
    const float inv = 1.0f / warp_sum(sum);
    for (int j = lane; j < T; j += 32) st(p + j, j <= t ? expf(s[j] - m) * inv : 0.0f);
}

template <typename D, typename P>
__global__ void causal_softmax_backward_kernel(D* dscores, const P* probs, const float* dprobs, int rows, int T,
                                               float scale) {
    const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    const int t = row % T;
    const P* p = probs + int64_t(row) * T;
    const float* dp = dprobs + int64_t(row) * T;
    D* ds = dscores + int64_t(row) * T;
    float dot = 0.0f;
    for (int j = lane; j <= t; j += 32) dot += ld(p + j) * dp[j];
    dot = warp_sum(dot);
    for (int j = lane; j < T; j += 32) st(ds + j, j <= t ? scale * ld(p + j) * (dp[j] - dot) : 0.0f);
}

}  // namespace

void causal_softmax(void* probs, DType probs_type, const float* scores, int rows, int T, cudaStream_t s) {
    if (rows == 0 || T == 0) return;  // a grid of 0 blocks is a launch error
    dispatch(probs_type, [&](auto* tag) {
        using P = std::remove_pointer_t<decltype(tag)>;
        causal_softmax_kernel<<<ceil_div(rows, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, s>>>(static_cast<P*>(probs),
                                                                                             scores, rows, T);
    });
    US_CUDA_CHECK_LAUNCH();
}

void causal_softmax_backward(void* dscores, DType dscores_type, const void* probs, DType probs_type,
                             const float* dprobs, int rows, int T, float scale, cudaStream_t s) {
    if (rows == 0 || T == 0) return;
    dispatch(dscores_type, [&](auto* dtag) {
        dispatch(probs_type, [&](auto* ptag) {
            using D = std::remove_pointer_t<decltype(dtag)>;
            using P = std::remove_pointer_t<decltype(ptag)>;
            causal_softmax_backward_kernel<<<ceil_div(rows, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, s>>>(
                static_cast<D*>(dscores), static_cast<const P*>(probs), dprobs, rows, T, scale);
        });
    });
    US_CUDA_CHECK_LAUNCH();
}

}  // namespace us::cuda
