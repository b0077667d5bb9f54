// Softmax cross-entropy over fp32 logits, in place: forward turns a row of logits into probabilities and writes
// the token's loss; backward turns the probabilities into dlogits = (probs - onehot) * dloss, in place or into a
// bf16 tensor. One block per row. bf16 runs take the fused form: the bf16 row is read once into registers, its max,
// sum and loss taken there, and probs - onehot written back over it (llm.c's fused classifier does the same; the
// fp32 path read 4-byte logits three times and wrote them twice).
#include <algorithm>

#include "engine/backend/cuda/device_types.cuh"
#include "engine/backend/cuda/kernels.h"

namespace us::cuda {

namespace {

constexpr int kThreads = 256;

// Online softmax statistics: (max, sum of exp(x - max)) of a thread's values, merged pairwise.
struct MaxSum {
    float m = -INFINITY, s = 0.0f;
    __device__ void add(float x) {
        if (x > m) {
            s = s * expf(m - x) + 1.0f;
            m = x;
        } else {
            s += expf(x - m);
        }
    }
    __device__ void merge(float om, float os) {
        const float nm = fmaxf(m, om);
        if (nm == -INFINITY) return;
        s = s * expf(m - nm) + os * expf(om - nm);
        m = nm;
    }
};

// A block's merge of every thread's MaxSum, in a fixed order.
__device__ MaxSum block_merge(MaxSum v, float* shared /* [2][32] */) {
    for (int o = 16; o > 0; o >>= 1) {
        const float om = __shfl_xor_sync(0xffffffffu, v.m, o), os = __shfl_xor_sync(0xffffffffu, v.s, o);
        v.merge(om, os);
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) shared[warp] = v.m, shared[32 + warp] = v.s;
    __syncthreads();
    MaxSum r;
    for (int w = 0; w < int(blockDim.x / 32); ++w) r.merge(shared[w], shared[32 + w]);
    __syncthreads();
    return r;
}

// One pass for the statistics (16-byte loads when kPacked), one to write the probabilities; the loss is
// log(sum) + max - logit[target], read before the row is overwritten.
template <bool kPacked>
__global__ void forward_kernel(float* losses, float* logits, const int32_t* targets, int V) {
    __shared__ float shared[64];
    float* row = logits + int64_t(blockIdx.x) * V;
    const float target_logit = row[targets[blockIdx.x]];
    MaxSum ms;
    if constexpr (kPacked) {
        for (int i = threadIdx.x * 4; i < V; i += blockDim.x * 4) {
            const float4 x = *reinterpret_cast<const float4*>(row + i);
            ms.add(x.x), ms.add(x.y), ms.add(x.z), ms.add(x.w);
        }
    } else {
        for (int i = threadIdx.x; i < V; i += blockDim.x) ms.add(row[i]);
    }
    const MaxSum total = block_merge(ms, shared);
    const float m = total.m, inv = 1.0f / total.s;
    if constexpr (kPacked) {
        for (int i = threadIdx.x * 4; i < V; i += blockDim.x * 4) {
            float4 x = *reinterpret_cast<const float4*>(row + i);
            x.x = expf(x.x - m) * inv, x.y = expf(x.y - m) * inv, x.z = expf(x.z - m) * inv, x.w = expf(x.w - m) * inv;
            *reinterpret_cast<float4*>(row + i) = x;
        }
    } else {
        for (int i = threadIdx.x; i < V; i += blockDim.x) row[i] = expf(row[i] - m) * inv;
    }
    if (threadIdx.x == 0) losses[blockIdx.x] = logf(total.s) + m - target_logit;
}

// dlogits = (probs - onehot) * dloss, in the output's dtype (T = float: in place; bf16: the head GEMMs' operand,
// so a bf16 run reads the probabilities once and writes half the bytes, with no conversion pass after).
template <bool kPacked, typename T>
__global__ void backward_kernel(T* dlogits, const float* probs, const int32_t* targets, float dloss, int V,
                                int vocab_begin) {
    const float* row = probs + int64_t(blockIdx.x) * V;
    T* out = dlogits + int64_t(blockIdx.x) * V;
    const int target = targets[blockIdx.x] - vocab_begin;  // outside [0, V): another rank's column
    if constexpr (kPacked) {
        for (int i = threadIdx.x * 8; i < V; i += blockDim.x * 8) {
            const float4 x0 = *reinterpret_cast<const float4*>(row + i);
            const float4 x1 = *reinterpret_cast<const float4*>(row + i + 4);
            float g[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
            for (int k = 0; k < 8; ++k) g[k] = g[k] * dloss - (i + k == target ? dloss : 0.0f);
            if constexpr (std::is_same_v<T, float>) {
                *reinterpret_cast<float4*>(out + i) = make_float4(g[0], g[1], g[2], g[3]);
                *reinterpret_cast<float4*>(out + i + 4) = make_float4(g[4], g[5], g[6], g[7]);
            } else {
                st_vec<T>(out + i, g);
            }
        }
    } else {
        for (int i = threadIdx.x; i < V; i += blockDim.x) st(out + i, row[i] * dloss - (i == target ? dloss : 0.0f));
    }
}

// The fused form: blockDim.x threads hold a bf16 row of up to 8 * blockDim.x * kVecs logits in registers as raw
// 16-byte vectors (4 registers for 8 logits), vector v of thread i at columns 8 (i + v blockDim.x). Max, then the
// sum of exponentials, each a fixed-order block reduction; the row becomes exp(x - max) / sum - onehot, rounded once
// to bf16. The exponential (the hardware's, __expf: a few ulp, far below bf16's rounding) is taken twice rather
// than kept: registers, not the special-function units, bound it.
template <int kVecs>
__global__ void __launch_bounds__(1024) fused_kernel(float* losses, bfloat* logits, const int32_t* targets, int V) {
    __shared__ float shared[32];
    bfloat* row = logits + int64_t(blockIdx.x) * V;
    const int target = targets[blockIdx.x];
    const float target_logit = ld(row + target);  // every thread reads it before the first barrier below
    Vec<bfloat> x[kVecs];
    auto column = [](int v) { return (int(threadIdx.x) + v * int(blockDim.x)) * kPack; };
    float m = -INFINITY;
#pragma unroll
    for (int v = 0; v < kVecs; ++v)
        if (column(v) < V) {
            x[v] = *reinterpret_cast<const Vec<bfloat>*>(row + column(v));
#pragma unroll
            for (int k = 0; k < kPack; ++k) m = fmaxf(m, ld(&x[v].v[k]));
        }
    m = block_reduce<true>(m, shared);
    float sum = 0.0f;
#pragma unroll
    for (int v = 0; v < kVecs; ++v)
        if (column(v) < V)
#pragma unroll
            for (int k = 0; k < kPack; ++k) sum += __expf(ld(&x[v].v[k]) - m);
    sum = block_reduce<false>(sum, shared);
    const float inv = 1.0f / sum;
#pragma unroll
    for (int v = 0; v < kVecs; ++v)
        if (column(v) < V) {
            Vec<bfloat> g;
#pragma unroll
            for (int k = 0; k < kPack; ++k)
                st(&g.v[k], __expf(ld(&x[v].v[k]) - m) * inv - (column(v) + k == target ? 1.0f : 0.0f));
            *reinterpret_cast<Vec<bfloat>*>(row + column(v)) = g;
        }
    if (threadIdx.x == 0) losses[blockIdx.x] = logf(sum) + m - target_logit;
}

// Rows too long for the registers, or not in whole 16-byte vectors: the same arithmetic from memory, three passes.
__global__ void fused_rows_kernel(float* losses, bfloat* logits, const int32_t* targets, int V) {
    __shared__ float shared[32];
    bfloat* row = logits + int64_t(blockIdx.x) * V;
    const int target = targets[blockIdx.x];
    const float target_logit = ld(row + target);
    float m = -INFINITY;
    for (int i = threadIdx.x; i < V; i += blockDim.x) m = fmaxf(m, ld(row + i));
    m = block_reduce<true>(m, shared);
    float sum = 0.0f;
    for (int i = threadIdx.x; i < V; i += blockDim.x) sum += expf(ld(row + i) - m);
    sum = block_reduce<false>(sum, shared);
    const float inv = 1.0f / sum;
    for (int i = threadIdx.x; i < V; i += blockDim.x)
        st(row + i, expf(ld(row + i) - m) * inv - (i == target ? 1.0f : 0.0f));
    if (threadIdx.x == 0) losses[blockIdx.x] = logf(sum) + m - target_logit;
}

__global__ void local_max_kernel(float* rowmax, const float* logits, int V, int valid) {
    __shared__ float shared[32];
    const float* row = logits + int64_t(blockIdx.x) * V;
    float m = -INFINITY;
    for (int i = threadIdx.x; i < valid; i += blockDim.x) m = fmaxf(m, row[i]);
    m = block_reduce<true>(m, shared);
    if (threadIdx.x == 0) rowmax[blockIdx.x] = m;
}

__global__ void local_sums_kernel(float* sums, const float* logits, const float* rowmax, const int32_t* targets, int V,
                                  int valid, int vocab_begin) {
    __shared__ float shared[32];
    const float* row = logits + int64_t(blockIdx.x) * V;
    const float m = rowmax[blockIdx.x];
    float s = 0.0f;
    for (int i = threadIdx.x; i < valid; i += blockDim.x) s += expf(row[i] - m);
    s = block_reduce<false>(s, shared);
    if (threadIdx.x == 0) {
        const int t = targets[blockIdx.x] - vocab_begin;
        sums[2 * int64_t(blockIdx.x)] = s;
        sums[2 * int64_t(blockIdx.x) + 1] = t >= 0 && t < valid ? row[t] : 0.0f;
    }
}

__global__ void finish_kernel(float* losses, float* logits, const float* rowmax, const float* sums, int V, int valid) {
    float* row = logits + int64_t(blockIdx.x) * V;
    const float m = rowmax[blockIdx.x], sum = sums[2 * int64_t(blockIdx.x)];
    const float inv = 1.0f / sum;
    for (int i = threadIdx.x; i < V; i += blockDim.x) row[i] = i < valid ? expf(row[i] - m) * inv : 0.0f;
    if (threadIdx.x == 0) losses[blockIdx.x] = logf(sum) + m - sums[2 * int64_t(blockIdx.x) + 1];
}

}  // namespace

void crossentropy_forward(float* losses, float* logits, const int32_t* targets, int N, int V, cudaStream_t s) {
    if (N == 0) return;
    if (vectorizable(V, 4, logits))
        forward_kernel<true><<<N, kThreads, 0, s>>>(losses, logits, targets, V);
    else
        forward_kernel<false><<<N, kThreads, 0, s>>>(losses, logits, targets, V);
    US_CUDA_CHECK_LAUNCH();
}

void crossentropy_backward(void* dlogits, DType t, const float* probs, const int32_t* targets, float dloss, int N,
                           int V, int vocab_begin, cudaStream_t s) {
    if (N == 0) return;
    dispatch(t, [&](auto* tag) {
        using X = std::remove_pointer_t<decltype(tag)>;
        X* out = static_cast<X*>(dlogits);
        if (vectorizable(V, 8, probs) && vectorizable(V, 8, out))
            backward_kernel<true><<<N, kThreads, 0, s>>>(out, probs, targets, dloss, V, vocab_begin);
        else
            backward_kernel<false><<<N, kThreads, 0, s>>>(out, probs, targets, dloss, V, vocab_begin);
    });
    US_CUDA_CHECK_LAUNCH();
}

void crossentropy_fused(float* losses, void* logits, const int32_t* targets, int N, int V, cudaStream_t s) {
    if (N == 0) return;
    auto* rows = static_cast<bfloat*>(logits);
    // threads: enough 32-lane warps for the row's vectors, at most 1024; then the vectors each thread holds
    const int vectors = V / kPack;
    const int threads = std::min(1024, std::max(32, ceil_div(vectors, 32) * 32));
    const int per_thread = ceil_div(vectors, threads);
    if (!vectorizable(V, kPack, rows) || per_thread > 8) {
        fused_rows_kernel<<<N, kThreads, 0, s>>>(losses, rows, targets, V);
    } else if (per_thread <= 1) {
        fused_kernel<1><<<N, threads, 0, s>>>(losses, rows, targets, V);
    } else if (per_thread <= 2) {
        fused_kernel<2><<<N, threads, 0, s>>>(losses, rows, targets, V);
    } else if (per_thread <= 4) {
        fused_kernel<4><<<N, threads, 0, s>>>(losses, rows, targets, V);
    } else {
        fused_kernel<8><<<N, threads, 0, s>>>(losses, rows, targets, V);
    }
    US_CUDA_CHECK_LAUNCH();
}

void crossentropy_local_max(float* rowmax, const float* logits, int N, int V, int valid, cudaStream_t s) {
    if (N == 0) return;
    local_max_kernel<<<N, kThreads, 0, s>>>(rowmax, logits, V, valid);
    US_CUDA_CHECK_LAUNCH();
}

void crossentropy_local_sums(float* sums, const float* logits, const float* rowmax, const int32_t* targets, int N,
                             int V, int valid, int vocab_begin, cudaStream_t s) {
    if (N == 0) return;
    local_sums_kernel<<<N, kThreads, 0, s>>>(sums, logits, rowmax, targets, V, valid, vocab_begin);
    US_CUDA_CHECK_LAUNCH();
}

void crossentropy_finish(float* losses, float* logits, const float* rowmax, const float* sums, int N, int V, int valid,
                         cudaStream_t s) {
    if (N == 0) return;
    finish_kernel<<<N, kThreads, 0, s>>>(losses, logits, rowmax, sums, V, valid);
    US_CUDA_CHECK_LAUNCH();
}

}  // namespace us::cuda
