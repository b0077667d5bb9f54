// Mixture-of-experts ops (backend.h): routing one thread per token, dispatch/combine one block per token row (its
// K choices walked in order), row reordering one block per row. Each output element is written by one thread, in
// a fixed order: deterministic. The routing bookkeeping between them (capacity, counts) is the host's.
#include "engine/backend/cuda/device_types.cuh"
#include "engine/backend/cuda/kernels.h"

namespace us::cuda {

namespace {

constexpr int kThreads = 128;

__global__ void route_kernel(float* probs, int32_t* topk, float* gates, int N, int E, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    float* row = probs + int64_t(n) * E;
    float m = row[0];
    for (int e = 1; e < E; ++e) m = fmaxf(m, row[e]);
    float sum = 0.0f;
    for (int e = 0; e < E; ++e) sum += row[e] = expf(row[e] - m);
    for (int e = 0; e < E; ++e) row[e] /= sum;
    int32_t* chosen = topk + int64_t(n) * K;
    float kept = 0.0f;
    for (int k = 0; k < K; ++k) {
        int best = -1;
        for (int e = 0; e < E; ++e) {
            bool taken = false;
            for (int j = 0; j < k; ++j) taken |= chosen[j] == e;
            if (!taken && (best < 0 || row[e] > row[best])) best = e;
        }
        chosen[k] = best;
        kept += row[best];
    }
    for (int k = 0; k < K; ++k) gates[int64_t(n) * K + k] = row[chosen[k]] / kept;
}

__global__ void route_backward_kernel(float* dlogits, const float* probs, const int32_t* topk, const float* gates,
                                      const float* dgates, const float* aux, int N, int E, int K, int tokens_per_seq) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    const float* p = probs + int64_t(n) * E;
    float* d = dlogits + int64_t(n) * E;
    for (int e = 0; e < E; ++e) d[e] = aux ? aux[int64_t(n / tokens_per_seq) * E + e] : 0.0f;
    float kept = 0.0f, dot = 0.0f;
    for (int k = 0; k < K; ++k) {
        kept += p[topk[int64_t(n) * K + k]];
        dot += dgates[int64_t(n) * K + k] * gates[int64_t(n) * K + k];
    }
    for (int k = 0; k < K; ++k) d[topk[int64_t(n) * K + k]] += (dgates[int64_t(n) * K + k] - dot) / kept;
    float s = 0.0f;
    for (int e = 0; e < E; ++e) s += p[e] * d[e];
    for (int e = 0; e < E; ++e) d[e] = p[e] * (d[e] - s);
}

template <typename X>
__global__ void dispatch_kernel(X* out, const X* x, const int32_t* rows, int K, int C) {
    const int n = blockIdx.x;
    for (int k = 0; k < K; ++k) {
        const int row = rows[int64_t(n) * K + k];
        if (row < 0) continue;
        for (int c = threadIdx.x; c < C; c += blockDim.x) out[int64_t(row) * C + c] = x[int64_t(n) * C + c];
    }
}

template <typename X>
__global__ void dispatch_backward_kernel(X* dx, const X* dout, const int32_t* rows, int K, int C) {
    const int n = blockIdx.x;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = ld(dx + int64_t(n) * C + c);
        for (int k = 0; k < K; ++k) {
            const int row = rows[int64_t(n) * K + k];
            if (row >= 0) acc += ld(dout + int64_t(row) * C + c);
        }
        st(dx + int64_t(n) * C + c, acc);
    }
}

template <typename X>
__global__ void combine_kernel(X* out, const X* y, const int32_t* rows, const float* gates, int K, int C) {
    const int n = blockIdx.x;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = ld(out + int64_t(n) * C + c);
        for (int k = 0; k < K; ++k) {
            const int row = rows[int64_t(n) * K + k];
            if (row >= 0) acc += gates[int64_t(n) * K + k] * ld(y + int64_t(row) * C + c);
        }
        st(out + int64_t(n) * C + c, acc);
    }
}

// One block per (token, choice): dy of its row, and the block's dot product for dgates.
template <typename X>
__global__ void combine_backward_kernel(X* dy, float* dgates, const X* dout, const X* y, const int32_t* rows,
                                        const float* gates, int K, int C) {
    __shared__ float partial[kThreads];
    const int n = blockIdx.x / K, k = blockIdx.x % K;
    const int row = rows[int64_t(n) * K + k];
    float dot = 0.0f;
    if (row >= 0)
        for (int c = threadIdx.x; c < C; c += blockDim.x) {
            const float dn = ld(dout + int64_t(n) * C + c);
            dot += dn * ld(y + int64_t(row) * C + c);
            st(dy + int64_t(row) * C + c, gates[int64_t(n) * K + k] * dn);
        }
    partial[threadIdx.x] = dot;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.0f;
        for (int i = 0; i < int(blockDim.x); ++i) s += partial[i];
        dgates[int64_t(n) * K + k] = s;
    }
}

template <typename X>
__global__ void gather_rows_kernel(X* dst, const X* src, const int32_t* index, int C) {
    const int i = blockIdx.x;
    for (int c = threadIdx.x; c < C; c += blockDim.x) dst[int64_t(i) * C + c] = src[int64_t(index[i]) * C + c];
}

}  // namespace

void moe_route(float* probs, int32_t* topk, float* gates, int N, int E, int K, cudaStream_t s) {
    if (N == 0) return;
    route_kernel<<<unsigned(ceil_div(N, kThreads)), kThreads, 0, s>>>(probs, topk, gates, N, E, K);
    US_CUDA_CHECK_LAUNCH();
}

void moe_route_backward(float* dlogits, const float* probs, const int32_t* topk, const float* gates,
                        const float* dgates, const float* aux, int N, int E, int K, int tokens_per_seq,
                        cudaStream_t s) {
    if (N == 0) return;
    route_backward_kernel<<<unsigned(ceil_div(N, kThreads)), kThreads, 0, s>>>(dlogits, probs, topk, gates, dgates, aux,
                                                                               N, E, K, tokens_per_seq);
    US_CUDA_CHECK_LAUNCH();
}

void moe_dispatch(void* out, const void* x, DType t, const int32_t* rows, int N, int K, int C, cudaStream_t s) {
    if (N == 0) return;
    dispatch(t, [&](auto* tag) {
        using X = std::remove_pointer_t<decltype(tag)>;
        dispatch_kernel<<<unsigned(N), kThreads, 0, s>>>(static_cast<X*>(out), static_cast<const X*>(x), rows, K, C);
    });
    US_CUDA_CHECK_LAUNCH();
}

void moe_dispatch_backward(void* dx, const void* dout, DType t, const int32_t* rows, int N, int K, int C,
                           cudaStream_t s) {
    if (N == 0) return;
    dispatch(t, [&](auto* tag) {
        using X = std::remove_pointer_t<decltype(tag)>;
        dispatch_backward_kernel<<<unsigned(N), kThreads, 0, s>>>(static_cast<X*>(dx), static_cast<const X*>(dout),
                                                                  rows, K, C);
    });
    US_CUDA_CHECK_LAUNCH();
}

void moe_combine(void* out, const void* y, DType t, const int32_t* rows, const float* gates, int N, int K, int C,
                 cudaStream_t s) {
    if (N == 0) return;
    dispatch(t, [&](auto* tag) {
        using X = std::remove_pointer_t<decltype(tag)>;
        combine_kernel<<<unsigned(N), kThreads, 0, s>>>(static_cast<X*>(out), static_cast<const X*>(y), rows, gates, K,
                                                        C);
    });
    US_CUDA_CHECK_LAUNCH();
}

void moe_combine_backward(void* dy, float* dgates, const void* dout, const void* y, DType t, const int32_t* rows,
                          const float* gates, int N, int K, int C, cudaStream_t s) {
    if (N == 0) return;
    dispatch(t, [&](auto* tag) {
        using X = std::remove_pointer_t<decltype(tag)>;
        combine_backward_kernel<<<unsigned(N * K), kThreads, 0, s>>>(
            static_cast<X*>(dy), dgates, static_cast<const X*>(dout), static_cast<const X*>(y), rows, gates, K, C);
    });
    US_CUDA_CHECK_LAUNCH();
}

void gather_rows(void* dst, const void* src, DType t, const int32_t* index, int M, int C, cudaStream_t s) {
    if (M == 0) return;
    dispatch(t, [&](auto* tag) {
        using X = std::remove_pointer_t<decltype(tag)>;
        gather_rows_kernel<<<unsigned(M), kThreads, 0, s>>>(static_cast<X*>(dst), static_cast<const X*>(src), index, C);
    });
    US_CUDA_CHECK_LAUNCH();
}

}  // namespace us::cuda
