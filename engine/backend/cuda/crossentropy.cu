// Softmax cross-entropy over fp32 logits, in place: forward turns a row of logits into probabilities and writes
// the token's loss; backward turns the probabilities into dlogits = (probs - onehot) * dloss, in place or into a
// bf16 tensor. One block per row.
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
