// LayerNorm, eps 1e-5, statistics in fp32. Forward and the input gradient run one warp per row; the weight and
// bias gradients sum rows in chunks (in row order) into fp32 partials, then the chunks in order.
#include "engine/backend/cuda/device_types.cuh"
#include "engine/backend/cuda/kernels.h"

namespace us::cuda {

namespace {

constexpr float kEps = 1e-5f;
constexpr int kWarpsPerBlock = 8;
constexpr int kRowsPerChunk = 64;
constexpr int kColumnThreads = 256;

// The row kernels read a row kPack elements at a time (16-byte accesses) when kPacked, one at a time otherwise;
// each lane sums its own elements in order, then the warp adds the lanes in a fixed tree.
template <bool kPacked, typename T>
__global__ void forward_kernel(T* out, float* mean, float* rstd, const T* inp, const T* w, const T* b, int N, int C) {
    constexpr int step = kPacked ? kPack : 1;
    const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const T* x = inp + int64_t(row) * C;
    float v[kPack];
    float s = 0.0f;
    for (int i = lane * step; i < C; i += 32 * step) {
        load(v, x + i, kPacked);
#pragma unroll
        for (int k = 0; k < step; ++k) s += v[k];
    }
    const float m = warp_sum(s) / float(C);
    float var = 0.0f;
    for (int i = lane * step; i < C; i += 32 * step) {
        load(v, x + i, kPacked);
#pragma unroll
        for (int k = 0; k < step; ++k) var += (v[k] - m) * (v[k] - m);
    }
    const float r = rsqrtf(warp_sum(var) / float(C) + kEps);
    T* y = out + int64_t(row) * C;
    for (int i = lane * step; i < C; i += 32 * step) {
        float wv[kPack], bv[kPack];
        load(v, x + i, kPacked), load(wv, w + i, kPacked), load(bv, b + i, kPacked);
#pragma unroll
        for (int k = 0; k < step; ++k) v[k] = (v[k] - m) * r * wv[k] + bv[k];
        store(y + i, v, kPacked);
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

// dinp += (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) * rstd, dnorm = dout * w.
template <bool kPacked, typename T>
__global__ void input_grad_kernel(T* dinp, const T* dout, const T* inp, const T* w, const float* mean,
                                  const float* rstd, int N, int C) {
    constexpr int step = kPacked ? kPack : 1;
    const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const T* x = inp + int64_t(row) * C;
    const T* dy = dout + int64_t(row) * C;
    T* dx = dinp + int64_t(row) * C;
    const float m = mean[row], r = rstd[row];
    float xv[kPack], wv[kPack], dv[kPack];
    float a = 0.0f, b = 0.0f;
    for (int i = lane * step; i < C; i += 32 * step) {
        load(xv, x + i, kPacked), load(wv, w + i, kPacked), load(dv, dy + i, kPacked);
#pragma unroll
        for (int k = 0; k < step; ++k) {
            const float dnorm = wv[k] * dv[k];
            a += dnorm;
            b += dnorm * (xv[k] - m) * r;
        }
    }
    const float dnorm_mean = warp_sum(a) / float(C), dnorm_norm_mean = warp_sum(b) / float(C);
    for (int i = lane * step; i < C; i += 32 * step) {
        float gv[kPack];
        load(xv, x + i, kPacked), load(wv, w + i, kPacked), load(dv, dy + i, kPacked), load(gv, dx + i, kPacked);
#pragma unroll
        for (int k = 0; k < step; ++k) {
            const float norm = (xv[k] - m) * r;
            gv[k] += (wv[k] * dv[k] - dnorm_mean - norm * dnorm_norm_mean) * r;
        }
        store(dx + i, gv, kPacked);
    }
}

// partials: [chunk][2][C] (weight, then bias)
template <typename T>
__global__ void param_partials_kernel(float* partials, const T* dout, const T* inp, const float* mean,
                                      const float* rstd, int N, int C) {
    // chunks on x (no 65535 limit: any number of rows), column tiles on y
    const int col = blockIdx.y * blockDim.x + threadIdx.x, chunk = blockIdx.x;
    if (col >= C) return;
    const int r0 = chunk * kRowsPerChunk, r1 = min(N, r0 + kRowsPerChunk);
    float dw = 0.0f, db = 0.0f;
    for (int r = r0; r < r1; ++r) {
        const float g = ld(dout + int64_t(r) * C + col);
        dw += (ld(inp + int64_t(r) * C + col) - mean[r]) * rstd[r] * g;
        db += g;
    }
    partials[(int64_t(chunk) * 2) * C + col] = dw;
    partials[(int64_t(chunk) * 2 + 1) * C + col] = db;
}

template <typename T>
__global__ void param_finish_kernel(T* dweight, T* dbias, const float* partials, int chunks, int C) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= C) return;
    float dw = 0.0f, db = 0.0f;
    for (int c = 0; c < chunks; ++c) {
        dw += partials[(int64_t(c) * 2) * C + col];
        db += partials[(int64_t(c) * 2 + 1) * C + col];
    }
    st(dweight + col, ld(dweight + col) + dw);
    st(dbias + col, ld(dbias + col) + db);
}

}  // namespace

void layernorm_forward(void* out, float* mean, float* rstd, const void* inp, const void* weight, const void* bias,
                       DType t, int N, int C, cudaStream_t s) {
    if (N == 0 || C == 0) return;  // a grid of 0 blocks is a launch error
    dispatch(t, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        auto launch = [&](auto packed) {
            forward_kernel<decltype(packed)::value><<<ceil_div(N, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, s>>>(
                static_cast<T*>(out), mean, rstd, static_cast<const T*>(inp), static_cast<const T*>(weight),
                static_cast<const T*>(bias), N, C);
        };
        if (vectorizable(C, kPack, out, inp, weight, bias))
            launch(std::true_type{});
        else
            launch(std::false_type{});
    });
    US_CUDA_CHECK_LAUNCH();
}

size_t layernorm_partials_floats(int N, int C) { return size_t(ceil_div(N, kRowsPerChunk)) * 2 * size_t(C); }

void layernorm_backward(void* dinp, void* dweight, void* dbias, const void* dout, const void* inp, const void* weight,
                        const float* mean, const float* rstd, DType t, int N, int C, float* partials, cudaStream_t s) {
    if (N == 0 || C == 0) return;
    const int chunks = ceil_div(N, kRowsPerChunk);
    dispatch(t, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        auto launch = [&](auto packed) {
            input_grad_kernel<decltype(packed)::value><<<ceil_div(N, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, s>>>(
                static_cast<T*>(dinp), static_cast<const T*>(dout), static_cast<const T*>(inp),
                static_cast<const T*>(weight), mean, rstd, N, C);
        };
        if (vectorizable(C, kPack, dinp, dout, inp, weight))
            launch(std::true_type{});
        else
            launch(std::false_type{});
        US_CUDA_CHECK_LAUNCH();
        param_partials_kernel<<<dim3(chunks, ceil_div(C, kColumnThreads)), kColumnThreads, 0, s>>>(
            partials, static_cast<const T*>(dout), static_cast<const T*>(inp), mean, rstd, N, C);
        US_CUDA_CHECK_LAUNCH();
        param_finish_kernel<<<ceil_div(C, kColumnThreads), kColumnThreads, 0, s>>>(
            static_cast<T*>(dweight), static_cast<T*>(dbias), partials, chunks, C);
    });
    US_CUDA_CHECK_LAUNCH();
}

}  // namespace us::cuda
