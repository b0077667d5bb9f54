// Blockwise attention with an online softmax (backend.h, AttentionBlockArgs), for ring attention. One thread block
// per (batch, head, query row) for the forward and dq, per (batch, head, key row) for dk and dv, each walking its
// chunk pairs in order and reducing in a fixed order: deterministic, no atomics. Plain loops over the chunk's keys
// (or queries): the general path. bf16 with head dim 64 takes the tensor-core tiles instead (attention_tiles.cu).
#include "engine/backend/cuda/attention_tiles.h"
#include "engine/backend/cuda/device_types.cuh"
#include "engine/backend/cuda/kernels.h"

namespace us::cuda {

namespace {

constexpr int kThreads = 128;

template <typename X>
__device__ float dot(const X* a, const X* b, int n) {
    float s = 0.0f;
    for (int d = 0; d < n; ++d) s += ld(a + d) * ld(b + d);
    return s;
}

// grid (T, B*NH): query row t of head h, batch b. Shared: the chunk's scores (chunk floats) and 32 for reductions.
template <typename X>
__global__ void forward_kernel(float* acc, float* row_max, float* row_sum, const X* qkv, const X* kv, int64_t kvs,
                               int T, int NH, int HD, int chunk, ChunkPairs pairs, float scale) {
    extern __shared__ float shared[];
    float* S = shared + 32;
    const int t = blockIdx.x, b = blockIdx.y / NH, h = blockIdx.y % NH, C = NH * HD;
    const X* q = qkv + (int64_t(b) * T + t) * 3 * C + h * HD;
    const int64_t at = (int64_t(b) * NH + h) * T + t;
    float* o = acc + (int64_t(b) * T + t) * C + h * HD;
    for (int pi = 0; pi < pairs.count; ++pi) {
        if (t / chunk != pairs.q_chunk[pi]) continue;
        const int i = t - pairs.q_chunk[pi] * chunk, k0 = pairs.k_chunk[pi] * chunk;
        const int n = pairs.causal[pi] ? i + 1 : chunk;
        float bm = -INFINITY;
        for (int j = threadIdx.x; j < n; j += blockDim.x) {
            S[j] = scale * dot(q, kv + (int64_t(b) * T + k0 + j) * kvs + h * HD, HD);
            bm = fmaxf(bm, S[j]);
        }
        bm = block_reduce<true>(bm, shared);
        const float m_old = row_sum[at] > 0.0f ? row_max[at] : -INFINITY, m_new = fmaxf(m_old, bm);  // 0: empty
        if (m_new == -INFINITY) continue;
        const float alpha = expf(m_old - m_new);
        float s = 0.0f;
        for (int j = threadIdx.x; j < n; j += blockDim.x) s += S[j] = expf(S[j] - m_new);
        s = block_reduce<false>(s, shared);
        for (int d = threadIdx.x; d < HD; d += blockDim.x) {
            float a = o[d] * alpha;
            for (int j = 0; j < n; ++j) a += S[j] * ld(kv + (int64_t(b) * T + k0 + j) * kvs + C + h * HD + d);
            o[d] = a;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            row_sum[at] = row_sum[at] * alpha + s;
            row_max[at] = m_new;
        }
        __syncthreads();
    }
}

// The memory-bound helpers below take one block per row (b, t) and walk its columns: no 64-bit division per element
// (their grid-stride versions cost 50-75 us per call on an H100 for that alone).
template <typename X>
__global__ void finish_kernel(X* out, float* lse, const float* acc, const float* row_max, const float* row_sum, int T,
                              int NH, int HD) {
    const int C = NH * HD;
    const int64_t bt = blockIdx.x;
    const int64_t head0 = bt / T * NH * int64_t(T) + bt % T;  // (b, h = 0, t) in the (B, NH, T) statistics
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const int64_t at = head0 + int64_t(c / HD) * T;
        st(out + bt * C + c, acc[bt * C + c] / row_sum[at]);
        if (c % HD == 0) lse[at] = row_max[at] + logf(row_sum[at]);
    }
}

// delta = rowsum(dO * O) per (b, h, t): a warp per head, its lanes over the head dimension, summed by warp_sum.
template <typename X>
__global__ void delta_kernel(float* delta, const X* dout, const X* out, int T, int NH, int HD) {
    const int C = NH * HD;
    const int64_t bt = blockIdx.x;
    const int64_t head0 = bt / T * NH * int64_t(T) + bt % T;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int h = warp; h < NH; h += blockDim.x / 32) {
        const X* d = dout + bt * C + h * HD;
        const X* o = out + bt * C + h * HD;
        float s = 0.0f;
        for (int k = lane; k < HD; k += 32) s += ld(d + k) * ld(o + k);
        s = warp_sum(s);
        if (lane == 0) delta[head0 + int64_t(h) * T] = s;
    }
}

// grid (T, B*NH): dq of query row t.
template <typename X>
__global__ void dq_kernel(float* dq, const X* qkv, const X* kv, int64_t kvs, const X* dout, const float* lse,
                          const float* delta, int T, int NH, int HD, int chunk, ChunkPairs pairs, float scale) {
    extern __shared__ float dS[];
    const int t = blockIdx.x, b = blockIdx.y / NH, h = blockIdx.y % NH, C = NH * HD;
    const X* q = qkv + (int64_t(b) * T + t) * 3 * C + h * HD;
    const X* dO = dout + (int64_t(b) * T + t) * C + h * HD;
    const int64_t at = (int64_t(b) * NH + h) * T + t;
    for (int pi = 0; pi < pairs.count; ++pi) {
        if (t / chunk != pairs.q_chunk[pi]) continue;
        const int i = t - pairs.q_chunk[pi] * chunk, k0 = pairs.k_chunk[pi] * chunk;
        const int n = pairs.causal[pi] ? i + 1 : chunk;
        for (int j = threadIdx.x; j < n; j += blockDim.x) {
            const X* kvj = kv + (int64_t(b) * T + k0 + j) * kvs + h * HD;
            const float p = expf(scale * dot(q, kvj, HD) - lse[at]);
            dS[j] = scale * p * (dot(dO, kvj + C, HD) - delta[at]);
        }
        __syncthreads();
        for (int d = threadIdx.x; d < HD; d += blockDim.x) {
            float g = 0.0f;
            for (int j = 0; j < n; ++j) g += dS[j] * ld(kv + (int64_t(b) * T + k0 + j) * kvs + h * HD + d);
            dq[(int64_t(b) * T + t) * C + h * HD + d] += g;
        }
        __syncthreads();
    }
}

// grid (T, B*NH): dk and dv of key row r (of the kv block).
template <typename X>
__global__ void dkv_kernel(float* dkv, const X* qkv, const X* kv, int64_t kvs, const X* dout, const float* lse,
                           const float* delta, int T, int NH, int HD, int chunk, ChunkPairs pairs, float scale) {
    extern __shared__ float shared[];
    const int r = blockIdx.x, b = blockIdx.y / NH, h = blockIdx.y % NH, C = NH * HD;
    float* P = shared;
    float* dS = shared + chunk;
    const X* kr = kv + (int64_t(b) * T + r) * kvs + h * HD;
    for (int pi = 0; pi < pairs.count; ++pi) {
        if (r / chunk != pairs.k_chunk[pi]) continue;
        const int j = r - pairs.k_chunk[pi] * chunk, q0 = pairs.q_chunk[pi] * chunk;
        const int first = pairs.causal[pi] ? j : 0;  // queries that see key j
        for (int i = first + int(threadIdx.x); i < chunk; i += blockDim.x) {
            const int64_t row = int64_t(b) * T + q0 + i, at = (int64_t(b) * NH + h) * T + q0 + i;
            const float p = expf(scale * dot(qkv + row * 3 * C + h * HD, kr, HD) - lse[at]);
            P[i] = p;
            dS[i] = scale * p * (dot(dout + row * C + h * HD, kr + C, HD) - delta[at]);
        }
        __syncthreads();
        for (int d = threadIdx.x; d < HD; d += blockDim.x) {
            float gk = 0.0f, gv = 0.0f;
            for (int i = first; i < chunk; ++i) {
                const int64_t row = int64_t(b) * T + q0 + i;
                gk += dS[i] * ld(qkv + row * 3 * C + h * HD + d);
                gv += P[i] * ld(dout + row * C + h * HD + d);
            }
            dkv[(int64_t(b) * T + r) * 2 * C + h * HD + d] += gk;
            dkv[(int64_t(b) * T + r) * 2 * C + C + h * HD + d] += gv;
        }
        __syncthreads();
    }
}

template <typename X>
__global__ void pack_kernel(X* kv, const X* qkv, int64_t rows, int C) {
    for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < rows * 2 * C;
         idx += int64_t(gridDim.x) * blockDim.x)
        kv[idx] = qkv[idx / (2 * C) * 3 * C + C + idx % (2 * C)];
}

template <typename X>
__global__ void store_kernel(X* dqkv, const float* dq, const float* dkv, int C) {
    const int64_t row = blockIdx.x;
    for (int col = threadIdx.x; col < 3 * C; col += blockDim.x)
        st(dqkv + row * 3 * C + col, col < C ? dq[row * C + col] : dkv[row * 2 * C + col - C]);
}

}  // namespace

void attention_block_forward(float* acc, float* row_max, float* row_sum, const void* qkv, const void* kv,
                             int64_t kv_stride, DType t, int B, int T, int NH, int HD, int chunk,
                             const ChunkPairs& pairs, cudaStream_t s) {
    if (B * T == 0 || pairs.count == 0) return;
    const float scale = 1.0f / sqrtf(float(HD));
    if (attention_tiles_apply(t, T, NH, HD, chunk, qkv, kv, kv_stride))
        return attention_tiles_forward(acc, row_max, row_sum, qkv, kv, kv_stride, B, T, NH, chunk, pairs, scale, s);
    dispatch(t, [&](auto* tag) {
        using X = std::remove_pointer_t<decltype(tag)>;
        forward_kernel<<<dim3(unsigned(T), unsigned(B * NH)), kThreads, (32 + size_t(chunk)) * sizeof(float), s>>>(
            acc, row_max, row_sum, static_cast<const X*>(qkv), static_cast<const X*>(kv), kv_stride, T, NH, HD, chunk,
            pairs, scale);
    });
    US_CUDA_CHECK_LAUNCH();
}

void attention_block_finish(void* out, DType t, float* lse, const float* acc, const float* row_max,
                            const float* row_sum, int B, int T, int NH, int HD, cudaStream_t s) {
    const int64_t total = int64_t(B) * T * NH * HD;
    if (total == 0) return;
    dispatch(t, [&](auto* tag) {
        using X = std::remove_pointer_t<decltype(tag)>;
        finish_kernel<<<unsigned(int64_t(B) * T), 256, 0, s>>>(static_cast<X*>(out), lse, acc, row_max, row_sum, T, NH,
                                                               HD);
    });
    US_CUDA_CHECK_LAUNCH();
}

void attention_block_delta(float* delta, const void* dout, const void* out, DType t, int B, int T, int NH, int HD,
                           cudaStream_t s) {
    const int64_t total = int64_t(B) * T * NH;
    if (total == 0) return;
    dispatch(t, [&](auto* tag) {
        using X = std::remove_pointer_t<decltype(tag)>;
        delta_kernel<<<unsigned(int64_t(B) * T), 128, 0, s>>>(delta, static_cast<const X*>(dout),
                                                              static_cast<const X*>(out), T, NH, HD);
    });
    US_CUDA_CHECK_LAUNCH();
}

void attention_block_backward(float* dq, float* dkv, const void* qkv, const void* kv, int64_t kv_stride,
                              const void* dout, DType t, const float* lse, const float* delta, int B, int T, int NH,
                              int HD, int chunk, const ChunkPairs& pairs, cudaStream_t s) {
    if (B * T == 0 || pairs.count == 0) return;
    const float scale = 1.0f / sqrtf(float(HD));
    if (attention_tiles_apply(t, T, NH, HD, chunk, qkv, kv, kv_stride) && aligned16(dout))
        return attention_tiles_backward(dq, dkv, qkv, kv, kv_stride, dout, lse, delta, B, T, NH, chunk, pairs, scale,
                                        s);
    dispatch(t, [&](auto* tag) {
        using X = std::remove_pointer_t<decltype(tag)>;
        const dim3 grid(unsigned(T), unsigned(B * NH));
        dq_kernel<<<grid, kThreads, size_t(chunk) * sizeof(float), s>>>(
            dq, static_cast<const X*>(qkv), static_cast<const X*>(kv), kv_stride, static_cast<const X*>(dout), lse,
            delta, T, NH, HD, chunk, pairs, scale);
        dkv_kernel<<<grid, kThreads, 2 * size_t(chunk) * sizeof(float), s>>>(
            dkv, static_cast<const X*>(qkv), static_cast<const X*>(kv), kv_stride, static_cast<const X*>(dout), lse,
            delta, T, NH, HD, chunk, pairs, scale);
    });
    US_CUDA_CHECK_LAUNCH();
}

void attention_block_pack_kv(void* kv, const void* qkv, DType t, int B, int T, int C, cudaStream_t s) {
    const int64_t rows = int64_t(B) * T;
    if (rows == 0) return;
    dispatch(t, [&](auto* tag) {
        using X = std::remove_pointer_t<decltype(tag)>;
        pack_kernel<<<grid_for(rows * 2 * C, 256), 256, 0, s>>>(static_cast<X*>(kv), static_cast<const X*>(qkv), rows,
                                                                C);
    });
    US_CUDA_CHECK_LAUNCH();
}

void attention_block_store_grads(void* dqkv, DType t, const float* dq, const float* dkv, int B, int T, int C,
                                 cudaStream_t s) {
    const int64_t rows = int64_t(B) * T;
    if (rows == 0) return;
    dispatch(t, [&](auto* tag) {
        using X = std::remove_pointer_t<decltype(tag)>;
        store_kernel<<<unsigned(rows), 256, 0, s>>>(static_cast<X*>(dqkv), dq, dkv, C);
    });
    US_CUDA_CHECK_LAUNCH();
}

}  // namespace us::cuda
