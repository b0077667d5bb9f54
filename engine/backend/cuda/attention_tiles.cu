// The tensor-core path of the blockwise attention (attention_blocks.cu dispatches here): bf16, head dim 64, chunks
// of a multiple of 64 rows. FlashAttention-2's tiling: a thread block takes 64 queries (forward, dq) or 64 keys
// (dk, dv) of one (batch, head), four warps of 16 rows each; every product is a 16 x 64 x 64 WMMA tile product with
// fp32 accumulation. The softmax bookkeeping runs on the fp32 tiles in shared memory, lane L on columns L and L + 32
// of every row (no bank conflicts; a row's maximum and sum are warp reductions). The probabilities and score
// gradients enter the products rounded to bf16 (as FlashAttention does); the running maxima, sums and accumulators
// stay fp32. Backward is two kernels (dq per query tile, dk and dv per key tile), each recomputing the
// probabilities from the saved log-sum-exp: every sum has a fixed order, no atomics.
#include <mma.h>

#include "engine/backend/cuda/attention_tiles.h"
#include "engine/backend/cuda/device_types.cuh"

namespace us::cuda {

namespace {

using namespace nvcuda;

constexpr int kTile = 64;  // rows per tile (queries or keys)
constexpr int kHD = 64;    // head dimension of this path
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kTileElems = kTile * kHD;
constexpr int kWarpElems = 16 * kHD;  // a warp's 16 rows of 64

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bfloat, wmma::row_major>;
using FragBT = wmma::fragment<wmma::matrix_b, 16, 16, 16, bfloat, wmma::col_major>;  // a row-major X read as X^T
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, bfloat, wmma::row_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// A 64 x 64 bf16 tile, its rows `stride` elements apart in global memory, into shared memory (16 bytes a load).
__device__ void load_tile(bfloat* dst, const bfloat* src, int64_t stride) {
    for (int v = threadIdx.x; v < kTileElems / 8; v += blockDim.x) {
        const int r = v / (kHD / 8), c = (v % (kHD / 8)) * 8;
        *reinterpret_cast<uint4*>(dst + r * kHD + c) = *reinterpret_cast<const uint4*>(src + r * stride + c);
    }
}

// out (16 x 64 fp32, row-major in shared memory) = A (16 x 64) . X^T, X a 64 x 64 row-major tile.
__device__ void product_xt(float* out, const bfloat* a, const bfloat* x) {
    FragC acc[4];
    for (int n = 0; n < 4; ++n) wmma::fill_fragment(acc[n], 0.0f);
    for (int k = 0; k < 4; ++k) {
        FragA fa;
        wmma::load_matrix_sync(fa, a + k * 16, kHD);
        for (int n = 0; n < 4; ++n) {
            FragBT fb;
            wmma::load_matrix_sync(fb, x + n * 16 * kHD + k * 16, kHD);
            wmma::mma_sync(acc[n], fa, fb, acc[n]);
        }
    }
    for (int n = 0; n < 4; ++n) wmma::store_matrix_sync(out + n * 16, acc[n], kHD, wmma::mem_row_major);
}

// acc (16 x 64 fp32, row-major in shared memory) += A (16 x 64 bf16) . Y, Y a 64 x 64 row-major tile.
__device__ void accumulate_product(float* acc, const bfloat* a, const bfloat* y) {
    FragC c[4];
    for (int n = 0; n < 4; ++n) wmma::load_matrix_sync(c[n], acc + n * 16, kHD, wmma::mem_row_major);
    for (int k = 0; k < 4; ++k) {
        FragA fa;
        wmma::load_matrix_sync(fa, a + k * 16, kHD);
        for (int n = 0; n < 4; ++n) {
            FragB fb;
            wmma::load_matrix_sync(fb, y + k * 16 * kHD + n * 16, kHD);
            wmma::mma_sync(c[n], fa, fb, c[n]);
        }
    }
    for (int n = 0; n < 4; ++n) wmma::store_matrix_sync(acc + n * 16, c[n], kHD, wmma::mem_row_major);
}


struct Where {
    int b, h, C;
    __device__ Where(int NH, int HD) : b(blockIdx.y / NH), h(blockIdx.y % NH), C(NH * HD) {}
};

// grid (T / 64, B * NH). Shared: Q, K, V tiles (bf16), per warp S (fp32), P (bf16), O (fp32).
__global__ void forward_kernel(float* acc, float* row_max, float* row_sum, const bfloat* qkv, const bfloat* kv, int T,
                               int NH, int chunk, ChunkPairs pairs, float scale) {
    extern __shared__ __align__(128) unsigned char smem[];
    bfloat* Q = reinterpret_cast<bfloat*>(smem);
    bfloat* K = Q + kTileElems;
    bfloat* V = K + kTileElems;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float* S = reinterpret_cast<float*>(V + kTileElems) + warp * kWarpElems;
    bfloat* P = reinterpret_cast<bfloat*>(reinterpret_cast<float*>(V + kTileElems) + kWarps * kWarpElems) + warp * kWarpElems;
    float* O = reinterpret_cast<float*>(reinterpret_cast<bfloat*>(reinterpret_cast<float*>(V + kTileElems) +
                                                                  kWarps * kWarpElems) + kWarps * kWarpElems) +
               warp * kWarpElems;
    const Where w(NH, kHD);
    const int t0 = blockIdx.x * kTile, qchunk = t0 / chunk, i0 = t0 - qchunk * chunk;
    const int64_t at0 = (int64_t(w.b) * NH + w.h) * T + t0 + 16 * warp;  // the warp's first row's statistics
    float* acc0 = acc + (int64_t(w.b) * T + t0 + 16 * warp) * w.C + w.h * kHD;
    float m[16], l[16];  // every lane holds every row's running maximum and sum
#pragma unroll
    for (int r = 0; r < 16; ++r) {
        l[r] = row_sum[at0 + r];
        m[r] = l[r] > 0.0f ? row_max[at0 + r] : -INFINITY;
        O[r * kHD + lane] = acc0[int64_t(r) * w.C + lane];
        O[r * kHD + 32 + lane] = acc0[int64_t(r) * w.C + 32 + lane];
    }
    load_tile(Q, qkv + (int64_t(w.b) * T + t0) * 3 * w.C + w.h * kHD, 3 * w.C);
    for (int pi = 0; pi < pairs.count; ++pi) {
        if (pairs.q_chunk[pi] != qchunk) continue;
        const int k0 = pairs.k_chunk[pi] * chunk, tiles = pairs.causal[pi] ? i0 / kTile + 1 : chunk / kTile;
        for (int kt = 0; kt < tiles; ++kt) {
            __syncthreads();  // the previous tiles are no longer read
            const bfloat* kv_tile = kv + (int64_t(w.b) * T + k0 + kt * kTile) * 2 * w.C + w.h * kHD;
            load_tile(K, kv_tile, 2 * w.C);
            load_tile(V, kv_tile + w.C, 2 * w.C);
            __syncthreads();
            product_xt(S, Q + 16 * warp * kHD, K);
            __syncwarp();
            const bool diagonal = pairs.causal[pi] && kt == i0 / kTile;
#pragma unroll
            for (int r = 0; r < 16; ++r) {
                const int row = 16 * warp + r;  // query within the tile; keys lane and lane + 32
                const float s0 = diagonal && lane > row ? -INFINITY : S[r * kHD + lane] * scale;
                const float s1 = diagonal && lane + 32 > row ? -INFINITY : S[r * kHD + 32 + lane] * scale;
                const float m_new = fmaxf(m[r], warp_max(fmaxf(s0, s1)));
                const float alpha = expf(m[r] - m_new);
                const float p0 = expf(s0 - m_new), p1 = expf(s1 - m_new);
                l[r] = l[r] * alpha + warp_sum(p0 + p1);
                m[r] = m_new;
                P[r * kHD + lane] = __float2bfloat16_rn(p0);
                P[r * kHD + 32 + lane] = __float2bfloat16_rn(p1);
                O[r * kHD + lane] *= alpha;
                O[r * kHD + 32 + lane] *= alpha;
            }
            __syncwarp();
            accumulate_product(O, P, V);
            __syncwarp();
        }
    }
#pragma unroll
    for (int r = 0; r < 16; ++r) {
        acc0[int64_t(r) * w.C + lane] = O[r * kHD + lane];
        acc0[int64_t(r) * w.C + 32 + lane] = O[r * kHD + 32 + lane];
        if (lane == 0) {
            row_max[at0 + r] = m[r];
            row_sum[at0 + r] = l[r];
        }
    }
}

// grid (T / 64, B * NH): dq of 64 queries. Shared: Q, dO, K, V tiles, per warp S (fp32), dS (bf16), dQ (fp32).
__global__ void dq_kernel(float* dq, const bfloat* qkv, const bfloat* kv, const bfloat* dout, const float* lse,
                          const float* delta, int T, int NH, int chunk, ChunkPairs pairs, float scale) {
    extern __shared__ __align__(128) unsigned char smem[];
    bfloat* Q = reinterpret_cast<bfloat*>(smem);
    bfloat* dO = Q + kTileElems;
    bfloat* K = dO + kTileElems;
    bfloat* V = K + kTileElems;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float* S = reinterpret_cast<float*>(V + kTileElems) + warp * kWarpElems;
    float* dQ = reinterpret_cast<float*>(V + kTileElems) + kWarps * kWarpElems + warp * kWarpElems;
    bfloat* dS = reinterpret_cast<bfloat*>(reinterpret_cast<float*>(V + kTileElems) + 2 * kWarps * kWarpElems) +
                 warp * kWarpElems;
    const Where w(NH, kHD);
    const int t0 = blockIdx.x * kTile, qchunk = t0 / chunk, i0 = t0 - qchunk * chunk;
    const int64_t at0 = (int64_t(w.b) * NH + w.h) * T + t0 + 16 * warp;
    float row_lse[16], row_delta[16];
#pragma unroll
    for (int r = 0; r < 16; ++r) {
        row_lse[r] = lse[at0 + r];
        row_delta[r] = delta[at0 + r];
        dQ[r * kHD + lane] = dQ[r * kHD + 32 + lane] = 0.0f;
    }
    load_tile(Q, qkv + (int64_t(w.b) * T + t0) * 3 * w.C + w.h * kHD, 3 * w.C);
    load_tile(dO, dout + (int64_t(w.b) * T + t0) * w.C + w.h * kHD, w.C);
    for (int pi = 0; pi < pairs.count; ++pi) {
        if (pairs.q_chunk[pi] != qchunk) continue;
        const int k0 = pairs.k_chunk[pi] * chunk, tiles = pairs.causal[pi] ? i0 / kTile + 1 : chunk / kTile;
        for (int kt = 0; kt < tiles; ++kt) {
            __syncthreads();
            const bfloat* kv_tile = kv + (int64_t(w.b) * T + k0 + kt * kTile) * 2 * w.C + w.h * kHD;
            load_tile(K, kv_tile, 2 * w.C);
            load_tile(V, kv_tile + w.C, 2 * w.C);
            __syncthreads();
            const bool diagonal = pairs.causal[pi] && kt == i0 / kTile;
            product_xt(S, Q + 16 * warp * kHD, K);
            __syncwarp();
            float p[16][2];
#pragma unroll
            for (int r = 0; r < 16; ++r) {
                const int row = 16 * warp + r;
                p[r][0] = diagonal && lane > row ? 0.0f : expf(S[r * kHD + lane] * scale - row_lse[r]);
                p[r][1] = diagonal && lane + 32 > row ? 0.0f : expf(S[r * kHD + 32 + lane] * scale - row_lse[r]);
            }
            __syncwarp();
            product_xt(S, dO + 16 * warp * kHD, V);  // dP = dO V^T
            __syncwarp();
#pragma unroll
            for (int r = 0; r < 16; ++r) {
                dS[r * kHD + lane] = __float2bfloat16_rn(scale * p[r][0] * (S[r * kHD + lane] - row_delta[r]));
                dS[r * kHD + 32 + lane] = __float2bfloat16_rn(scale * p[r][1] * (S[r * kHD + 32 + lane] - row_delta[r]));
            }
            __syncwarp();
            accumulate_product(dQ, dS, K);
            __syncwarp();
        }
    }
    float* out = dq + (int64_t(w.b) * T + t0 + 16 * warp) * w.C + w.h * kHD;
#pragma unroll
    for (int r = 0; r < 16; ++r) {
        out[int64_t(r) * w.C + lane] += dQ[r * kHD + lane];
        out[int64_t(r) * w.C + 32 + lane] += dQ[r * kHD + 32 + lane];
    }
}

// grid (T / 64, B * NH): dk and dv of 64 keys of the block. Shared: K, V, Q, dO tiles, the query tile's lse and
// delta, per warp S^T (fp32), P^T and dS^T (bf16), dK and dV (fp32).
__global__ void dkv_kernel(float* dkv, const bfloat* qkv, const bfloat* kv, const bfloat* dout, const float* lse,
                           const float* delta, int T, int NH, int chunk, ChunkPairs pairs, float scale) {
    extern __shared__ __align__(128) unsigned char smem[];
    bfloat* K = reinterpret_cast<bfloat*>(smem);
    bfloat* V = K + kTileElems;
    bfloat* Q = V + kTileElems;
    bfloat* dO = Q + kTileElems;
    float* tile_lse = reinterpret_cast<float*>(dO + kTileElems);
    float* tile_delta = tile_lse + kTile;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float* St = tile_delta + kTile + warp * kWarpElems;
    float* dK = tile_delta + kTile + kWarps * kWarpElems + warp * kWarpElems;
    float* dV = tile_delta + kTile + 2 * kWarps * kWarpElems + warp * kWarpElems;
    bfloat* Pt = reinterpret_cast<bfloat*>(tile_delta + kTile + 3 * kWarps * kWarpElems) + warp * kWarpElems;
    bfloat* dSt = Pt + kWarps * kWarpElems;
    const Where w(NH, kHD);
    const int r0 = blockIdx.x * kTile, kchunk = r0 / chunk, j0 = r0 - kchunk * chunk;
#pragma unroll
    for (int r = 0; r < 16; ++r) {
        dK[r * kHD + lane] = dK[r * kHD + 32 + lane] = 0.0f;
        dV[r * kHD + lane] = dV[r * kHD + 32 + lane] = 0.0f;
    }
    const bfloat* kv_tile = kv + (int64_t(w.b) * T + r0) * 2 * w.C + w.h * kHD;
    load_tile(K, kv_tile, 2 * w.C);
    load_tile(V, kv_tile + w.C, 2 * w.C);
    for (int pi = 0; pi < pairs.count; ++pi) {
        if (pairs.k_chunk[pi] != kchunk) continue;
        const int q0 = pairs.q_chunk[pi] * chunk, first = pairs.causal[pi] ? j0 / kTile : 0;
        for (int qt = first; qt < chunk / kTile; ++qt) {
            __syncthreads();
            const int64_t q_row = int64_t(w.b) * T + q0 + qt * kTile;
            load_tile(Q, qkv + q_row * 3 * w.C + w.h * kHD, 3 * w.C);
            load_tile(dO, dout + q_row * w.C + w.h * kHD, w.C);
            for (int i = threadIdx.x; i < kTile; i += blockDim.x) {
                const int64_t at = (int64_t(w.b) * NH + w.h) * T + q0 + qt * kTile + i;
                tile_lse[i] = lse[at];
                tile_delta[i] = delta[at];
            }
            __syncthreads();
            const bool diagonal = pairs.causal[pi] && qt == j0 / kTile;
            product_xt(St, K + 16 * warp * kHD, Q);  // S^T = K Q^T
            __syncwarp();
            // lane: queries lane and lane + 32 of the tile; rows: the warp's 16 keys
            const float lse0 = tile_lse[lane], lse1 = tile_lse[lane + 32];
            const float delta0 = tile_delta[lane], delta1 = tile_delta[lane + 32];
            float p[16][2];
#pragma unroll
            for (int r = 0; r < 16; ++r) {
                const int key = 16 * warp + r;
                p[r][0] = diagonal && lane < key ? 0.0f : expf(St[r * kHD + lane] * scale - lse0);
                p[r][1] = diagonal && lane + 32 < key ? 0.0f : expf(St[r * kHD + 32 + lane] * scale - lse1);
                Pt[r * kHD + lane] = __float2bfloat16_rn(p[r][0]);
                Pt[r * kHD + 32 + lane] = __float2bfloat16_rn(p[r][1]);
            }
            __syncwarp();
            product_xt(St, V + 16 * warp * kHD, dO);  // dP^T = V dO^T
            __syncwarp();
#pragma unroll
            for (int r = 0; r < 16; ++r) {
                dSt[r * kHD + lane] = __float2bfloat16_rn(scale * p[r][0] * (St[r * kHD + lane] - delta0));
                dSt[r * kHD + 32 + lane] = __float2bfloat16_rn(scale * p[r][1] * (St[r * kHD + 32 + lane] - delta1));
            }
            __syncwarp();
            accumulate_product(dV, Pt, dO);  // dV += P^T dO
            accumulate_product(dK, dSt, Q);  // dK += dS^T Q
            __syncwarp();
        }
    }
    float* out = dkv + (int64_t(w.b) * T + r0 + 16 * warp) * 2 * w.C + w.h * kHD;
#pragma unroll
    for (int r = 0; r < 16; ++r) {
        float* o = out + int64_t(r) * 2 * w.C;
        o[lane] += dK[r * kHD + lane];
        o[32 + lane] += dK[r * kHD + 32 + lane];
        o[w.C + lane] += dV[r * kHD + lane];
        o[w.C + 32 + lane] += dV[r * kHD + 32 + lane];
    }
}

constexpr size_t kForwardShared = 3 * kTileElems * sizeof(bfloat) + kWarps * kWarpElems * (2 * sizeof(float) + sizeof(bfloat));
constexpr size_t kDqShared = 4 * kTileElems * sizeof(bfloat) + kWarps * kWarpElems * (2 * sizeof(float) + sizeof(bfloat));
constexpr size_t kDkvShared = 4 * kTileElems * sizeof(bfloat) + 2 * kTile * sizeof(float) +
                              kWarps * kWarpElems * (3 * sizeof(float) + 2 * sizeof(bfloat));

template <typename Kernel>
void allow_shared(Kernel kernel, size_t bytes) {
    US_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

}  // namespace

bool attention_tiles_apply(DType t, int T, int NH, int HD, int chunk, const void* qkv, const void* kv) {
    return t == DType::bf16 && HD == kHD && chunk % kTile == 0 && T % kTile == 0 && aligned16(qkv) && aligned16(kv) &&
           (NH * HD) % 8 == 0;
}

void attention_tiles_forward(float* acc, float* row_max, float* row_sum, const void* qkv, const void* kv, int B, int T,
                             int NH, int chunk, const ChunkPairs& pairs, float scale, cudaStream_t s) {
    static const bool ready = (allow_shared(forward_kernel, kForwardShared), true);
    (void)ready;
    forward_kernel<<<dim3(unsigned(T / kTile), unsigned(B * NH)), kThreads, kForwardShared, s>>>(
        acc, row_max, row_sum, static_cast<const bfloat*>(qkv), static_cast<const bfloat*>(kv), T, NH, chunk, pairs,
        scale);
    US_CUDA_CHECK_LAUNCH();
}

void attention_tiles_backward(float* dq, float* dkv, const void* qkv, const void* kv, const void* dout,
                              const float* lse, const float* delta, int B, int T, int NH, int chunk,
                              const ChunkPairs& pairs, float scale, cudaStream_t s) {
    static const bool ready = (allow_shared(dq_kernel, kDqShared), allow_shared(dkv_kernel, kDkvShared), true);
    (void)ready;
    const dim3 grid(unsigned(T / kTile), unsigned(B * NH));
    dq_kernel<<<grid, kThreads, kDqShared, s>>>(dq, static_cast<const bfloat*>(qkv), static_cast<const bfloat*>(kv),
                                                static_cast<const bfloat*>(dout), lse, delta, T, NH, chunk, pairs, scale);
    US_CUDA_CHECK_LAUNCH();
    dkv_kernel<<<grid, kThreads, kDkvShared, s>>>(dkv, static_cast<const bfloat*>(qkv), static_cast<const bfloat*>(kv),
                                                  static_cast<const bfloat*>(dout), lse, delta, T, NH, chunk, pairs, scale);
    US_CUDA_CHECK_LAUNCH();
}

}  // namespace us::cuda
