// The tensor-core path of the blockwise attention (attention_blocks.cu dispatches here): bf16, head dim 64, chunks
// of a multiple of 64 rows. FlashAttention-2's scheme: a thread block takes 64 queries (forward, dq) or 64 keys
// (dk, dv) of one (batch, head), four warps of 16 rows each, and walks the other side's 64-row tiles through shared
// memory. Every product is PTX mma.sync m16n8k16 (bf16 in, fp32 accumulate), whose register layout is documented:
// a thread holds two rows (g and g + 8 of its warp's 16) of every accumulator, so the softmax's row maxima and sums
// are its own values plus two shuffles, and the scores, probabilities and output never leave registers. The
// probabilities and score gradients enter the products rounded to bf16 (as FlashAttention does); statistics and
// accumulators stay fp32. Backward is two kernels (dq per query tile; dk and dv per key tile), each recomputing
// the probabilities from the saved log-sum-exp: every sum has a fixed order, no atomics.
//
// Two modes (kWhole). Blockwise (ring attention's steps): the softmax state and the gradients are fp32 buffers that
// several calls accumulate into, finished by other kernels. Whole (one rank's whole causal sequence, --attention
// flash): one call sees every key, so the forward writes the bf16 output and the log-sum-exp itself, dq writes
// the row terms (delta) and its bf16 gradient, and dk/dv theirs, straight into dqkv: no fp32 state or gradients
// travel through memory, and the finish, delta and store kernels do not run.
#include <cstdint>

#include "engine/backend/cuda/attention_tiles.h"
#include "engine/backend/cuda/device_types.cuh"

namespace us::cuda {

namespace {

constexpr int kTile = 64;  // rows per tile (queries or keys)
constexpr int kHD = 64;    // head dimension of this path
constexpr int kPad = 72;   // shared-memory row stride in elements: rows 4 banks apart, conflict-free fragments
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kTileSmem = kTile * kPad;  // elements of one padded tile

// d (16 x 8, fp32) += a (16 x 16, bf16, row) . b (16 x 8, bf16, col)
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
}

// ldmatrix: four 8 x 8 bf16 matrices from shared memory, each lane giving one row address (lanes 8i..8i+7 the rows
// of matrix i); a lane receives row lane/4, columns 2(lane%4) and +1 of each (.trans: of each transposed). One
// instruction replaces the eight to sixteen scalar loads of a fragment pair.
__device__ __forceinline__ uint32_t shared_address(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const bfloat* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const bfloat* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(p)));
}

// A 64 x 64 bf16 tile, its rows `stride` elements apart in global memory, into padded shared memory.
__device__ void load_tile(bfloat* dst, const bfloat* src, int64_t stride) {
    for (int v = threadIdx.x; v < kTile * kHD / 8; v += blockDim.x) {
        const int r = v / (kHD / 8), c = (v % (kHD / 8)) * 8;
        *reinterpret_cast<uint4*>(dst + r * kPad + c) = *reinterpret_cast<const uint4*>(src + r * stride + c);
    }
}

// cp.async: 16-byte copies from global to shared memory that proceed while the block computes (Ampere and newer).
// A commit closes a group of them; wait<N> returns once at most N groups are still in flight. The kernels below
// double-buffer the tiles they walk: the next tile's copies are issued before the current tile's products.
__device__ __forceinline__ void copy_async16(void* dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_address(dst)), "l"(src));
}
__device__ __forceinline__ void commit_async() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void wait_async() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
__device__ void load_tile_async(bfloat* dst, const bfloat* src, int64_t stride) {
    for (int v = threadIdx.x; v < kTile * kHD / 8; v += blockDim.x) {
        const int r = v / (kHD / 8), c = (v % (kHD / 8)) * 8;
        copy_async16(dst + r * kPad + c, src + r * stride + c);
    }
}

// Lane coordinates in the mma layouts: g = row within 8 (and g + 8), t = the column pair 2t, 2t + 1.
struct Lane {
    int g, t;
    __device__ Lane() : g((threadIdx.x % 32) / 4), t(threadIdx.x % 4) {}
};

// acc[j] (16 x 8, columns 8j..8j+7) = rows [row0, row0 + 16) of X . Y^T over the head dimension, X and Y padded
// row-major tiles: scores (Q K^T), their gradient's dO V^T, and the transposed forms K Q^T, V dO^T.
__device__ void rows_times_rows_t(float (&acc)[8][4], const bfloat* X, int row0, const bfloat* Y, Lane l) {
    const int lane = threadIdx.x % 32;
    for (int j = 0; j < 8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
        // A: rows row0..+15 by k 16kk..+15, as matrices (rows 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15)
        uint32_t a[4];
        ldmatrix_x4(a, X + (row0 + lane % 16) * kPad + 16 * kk + (lane / 16) * 8);
#pragma unroll
        for (int j = 0; j < 8; j += 2) {
            // B of column tiles j and j + 1: Y's rows 8j..8j+15 by k, as (rows 0-7, k 0-7), (0-7, 8-15), (8-15, ...)
            uint32_t b[4];
            ldmatrix_x4(b, Y + (8 * j + lane % 8 + (lane / 16) * 8) * kPad + 16 * kk + ((lane / 8) % 2) * 8);
            const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
            mma(acc[j], a, b0);
            mma(acc[j + 1], a, b1);
        }
    }
    (void)l;
}

// out[jd] (16 x 8, head-dimension columns 8jd..) += P . Z, P the 16 x 64 values in registers (the accumulator
// layout of rows_times_rows_t), Z a padded 64 x 64 tile whose rows match P's columns.
__device__ void regs_times_rows(float (&out)[8][4], const float (&p)[8][4], const bfloat* Z, Lane l) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
        // the accumulators of column tiles 2kk and 2kk + 1 are exactly an A fragment of 16 columns
        const uint32_t a[4] = {pack(p[2 * kk][0], p[2 * kk][1]), pack(p[2 * kk][2], p[2 * kk][3]),
                               pack(p[2 * kk + 1][0], p[2 * kk + 1][1]), pack(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
        for (int jd = 0; jd < 8; jd += 2) {
            // B of output tiles jd and jd + 1: Z's rows 16kk..+15 (k) by columns 8jd..+15 (n), transposed on load
            uint32_t b[4];
            ldmatrix_x4_trans(b, Z + (16 * kk + lane % 8 + ((lane / 8) % 2) * 8) * kPad + 8 * jd + (lane / 16) * 8);
            const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
            mma(out[jd], a, b0);
            mma(out[jd + 1], a, b1);
        }
    }
    (void)l;
}

// The same product from A fragments already packed (a[kk] covers columns 16kk..16kk+15 of the 16 x 64 values, in
// regs_times_rows's order: tiles 2kk and 2kk + 1, rows g and g + 8).
__device__ void fragments_times_rows(float (&out)[8][4], const uint32_t (&a)[4][4], const bfloat* Z) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int jd = 0; jd < 8; jd += 2) {
            uint32_t b[4];
            ldmatrix_x4_trans(b, Z + (16 * kk + lane % 8 + ((lane / 8) % 2) * 8) * kPad + 8 * jd + (lane / 16) * 8);
            const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
            mma(out[jd], a[kk], b0);
            mma(out[jd + 1], a[kk], b1);
        }
}

__device__ __forceinline__ float quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

struct Where {
    int b, h, C;
    __device__ Where(int NH) : b(blockIdx.x / NH), h(blockIdx.x % NH), C(NH * kHD) {}
};

// Where each kernel's results go. Blockwise: fp32 buffers accumulated over calls. Whole: the final tensors.
struct ForwardOut {
    float *acc = nullptr, *row_max = nullptr, *row_sum = nullptr;  // blockwise
    bfloat* out = nullptr;                                         // whole: (B,T,C)
    float* lse = nullptr;                                          // whole: (B,NH,T)
};
struct BackwardOut {
    float *dq = nullptr, *dkv = nullptr;  // blockwise: (B,T,C), (B,T,2C) fp32 +=
    bfloat* dqkv = nullptr;               // whole: (B,T,3C) =
    float* delta = nullptr;               // whole: written by dq_kernel from dout and out, read by dkv_kernel
    const bfloat* out = nullptr;          // whole: the forward's output, for delta
};

__device__ __forceinline__ void st_pair(bfloat* p, float a, float b) {
    *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
}

// The grids are (B * NH, T / 64): the tile index is the slow one, so every head's tiles of one index run together
// and a causal pass starts with its longest tiles (the last queries; for dk/dv the first keys), not with a tail of
// them at the end.
__device__ __forceinline__ int last_tiles_first() { return int(gridDim.y - 1 - blockIdx.y) * kTile; }

// grid (B * NH, T / 64): 64 queries against their pairs' key/value tiles; acc, row_max, row_sum carry the online
// softmax across calls (a zero sum: nothing merged yet).
template <bool kWhole>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(ForwardOut fo, const bfloat* qkv, const bfloat* kv, int64_t kvs, int T, int NH, int chunk,
                   ChunkPairs pairs, float scale) {
    __shared__ __align__(16) bfloat Q[kTileSmem], K[2][kTileSmem], V[2][kTileSmem];  // 46 KB
    const Lane l;
    const int warp = threadIdx.x / 32;
    const Where w(NH);
    const int t0 = last_tiles_first(), qchunk = t0 / chunk, i0 = t0 - qchunk * chunk;
    const int rows[2] = {16 * warp + l.g, 16 * warp + l.g + 8};  // this thread's two rows within the tile
    float m[2], s_l[2], o[8][4];
    for (int e = 0; e < 2; ++e) {
        if constexpr (kWhole) {  // nothing merged yet
            s_l[e] = 0.0f, m[e] = -INFINITY;
            for (int jd = 0; jd < 8; ++jd) o[jd][2 * e] = o[jd][2 * e + 1] = 0.0f;
        } else {
            const int64_t at = (int64_t(w.b) * NH + w.h) * T + t0 + rows[e];
            s_l[e] = fo.row_sum[at];
            m[e] = s_l[e] > 0.0f ? fo.row_max[at] : -INFINITY;
            const float* a = fo.acc + (int64_t(w.b) * T + t0 + rows[e]) * w.C + w.h * kHD + 2 * l.t;
            for (int jd = 0; jd < 8; ++jd) {
                const float2 v = *reinterpret_cast<const float2*>(a + 8 * jd);
                o[jd][2 * e] = v.x, o[jd][2 * e + 1] = v.y;
            }
        }
    }
    load_tile(Q, qkv + (int64_t(w.b) * T + t0) * 3 * w.C + w.h * kHD, 3 * w.C);
    for (int pi = 0; pi < pairs.count; ++pi) {
        if (pairs.q_chunk[pi] != qchunk) continue;
        const int k0 = pairs.k_chunk[pi] * chunk, tiles = pairs.causal[pi] ? i0 / kTile + 1 : chunk / kTile;
        auto issue = [&](int kt, int buf) {
            const bfloat* kv_tile = kv + (int64_t(w.b) * T + k0 + kt * kTile) * kvs + w.h * kHD;
            load_tile_async(K[buf], kv_tile, kvs);
            load_tile_async(V[buf], kv_tile + w.C, kvs);
            commit_async();
        };
        __syncthreads();  // the previous pair's tiles are no longer read
        issue(0, 0);
        for (int kt = 0; kt < tiles; ++kt) {
            const int buf = kt & 1;
            if (kt + 1 < tiles) {
                issue(kt + 1, buf ^ 1);  // its buffer was last read in the iteration before: all threads are past it
                wait_async<1>();
            } else {
                wait_async<0>();
            }
            __syncthreads();  // tile kt is in shared memory, from every thread's copies
            float s[8][4];
            rows_times_rows_t(s, Q, 16 * warp, K[buf], l);
            const bool diagonal = pairs.causal[pi] && kt == i0 / kTile;
            for (int e = 0; e < 2; ++e) {
                float mx = -INFINITY;
#pragma unroll
                for (int j = 0; j < 8; ++j)
#pragma unroll
                    for (int c = 0; c < 2; ++c) {
                        const int key = 8 * j + 2 * l.t + c;
                        float& v = s[j][2 * e + c];
                        v = diagonal && key > rows[e] ? -INFINITY : v * scale;
                        mx = fmaxf(mx, v);
                    }
                const float m_new = fmaxf(m[e], quad_max(mx));
                const float alpha = __expf(m[e] - m_new);
                float sum = 0.0f;
#pragma unroll
                for (int j = 0; j < 8; ++j)
#pragma unroll
                    for (int c = 0; c < 2; ++c) {
                        float& v = s[j][2 * e + c];
                        v = __expf(v - m_new);
                        sum += v;
                    }
                s_l[e] = s_l[e] * alpha + quad_sum(sum);
                m[e] = m_new;
#pragma unroll
                for (int jd = 0; jd < 8; ++jd) o[jd][2 * e] *= alpha, o[jd][2 * e + 1] *= alpha;
            }
            regs_times_rows(o, s, V[buf], l);
            __syncthreads();  // every thread is done with this buffer before it is refilled
        }
    }
    for (int e = 0; e < 2; ++e) {
        const int64_t at = (int64_t(w.b) * NH + w.h) * T + t0 + rows[e];
        const int64_t col = (int64_t(w.b) * T + t0 + rows[e]) * w.C + w.h * kHD + 2 * l.t;
        if constexpr (kWhole) {  // the finish kernel's arithmetic: acc / sum, max + log(sum)
            for (int jd = 0; jd < 8; ++jd)
                st_pair(fo.out + col + 8 * jd, o[jd][2 * e] / s_l[e], o[jd][2 * e + 1] / s_l[e]);
            if (l.t == 0) fo.lse[at] = m[e] + logf(s_l[e]);
        } else {
            for (int jd = 0; jd < 8; ++jd)
                *reinterpret_cast<float2*>(fo.acc + col + 8 * jd) = make_float2(o[jd][2 * e], o[jd][2 * e + 1]);
            if (l.t == 0) {
                fo.row_max[at] = m[e];
                fo.row_sum[at] = s_l[e];
            }
        }
    }
}

// delta = rowsum(dO * O) of a tile's 64 rows (one head): two threads a row, 32 columns each, 16-byte loads, the
// halves joined by a shuffle; into shared memory for the tile's threads and into `delta` for dkv_kernel.
__device__ void tile_delta(float* shared_delta, float* delta, const bfloat* dO, const bfloat* O, int64_t stride,
                           int64_t at0) {
    const int row = threadIdx.x / 2, half = threadIdx.x % 2;
    float sum = 0.0f;
    for (int c = 32 * half; c < 32 * half + 32; c += kPack) {
        float d[kPack], o[kPack];
        ld8(d, dO + row * stride + c);
        ld8(o, O + row * stride + c);
#pragma unroll
        for (int k = 0; k < kPack; ++k) sum += d[k] * o[k];
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    if (half == 0) {
        shared_delta[row] = sum;
        delta[at0 + row] = sum;
    }
}

// grid (B * NH, T / 64): dq of 64 queries.
template <bool kWhole>
__global__ void __launch_bounds__(kThreads)
    dq_kernel(BackwardOut bo, const bfloat* qkv, const bfloat* kv, int64_t kvs, const bfloat* dout, const float* lse,
              const float* delta, int T, int NH, int chunk, ChunkPairs pairs, float scale) {
    static_assert(kThreads == 2 * kTile, "tile_delta gives each row two threads");
    __shared__ float whole_delta[kTile];
    extern __shared__ __align__(16) bfloat dq_smem[];  // Q, dO, then K and V twice: 55 KB (dynamic)
    bfloat* Q = dq_smem;
    bfloat* dO = dq_smem + kTileSmem;
    bfloat* K[2] = {dq_smem + 2 * kTileSmem, dq_smem + 3 * kTileSmem};
    bfloat* V[2] = {dq_smem + 4 * kTileSmem, dq_smem + 5 * kTileSmem};
    const Lane l;
    const int warp = threadIdx.x / 32;
    const Where w(NH);
    const int t0 = last_tiles_first(), qchunk = t0 / chunk, i0 = t0 - qchunk * chunk;
    const int rows[2] = {16 * warp + l.g, 16 * warp + l.g + 8};
    float row_lse[2], row_delta[2], g[8][4] = {};
    if constexpr (kWhole) {
        const int64_t first = int64_t(w.b) * T + t0;
        tile_delta(whole_delta, bo.delta, dout + first * w.C + w.h * kHD, bo.out + first * w.C + w.h * kHD, w.C,
                   (int64_t(w.b) * NH + w.h) * T + t0);
        __syncthreads();
    }
    for (int e = 0; e < 2; ++e) {
        const int64_t at = (int64_t(w.b) * NH + w.h) * T + t0 + rows[e];
        row_lse[e] = lse[at];
        row_delta[e] = kWhole ? whole_delta[rows[e]] : delta[at];
    }
    load_tile(Q, qkv + (int64_t(w.b) * T + t0) * 3 * w.C + w.h * kHD, 3 * w.C);
    load_tile(dO, dout + (int64_t(w.b) * T + t0) * w.C + w.h * kHD, w.C);
    for (int pi = 0; pi < pairs.count; ++pi) {
        if (pairs.q_chunk[pi] != qchunk) continue;
        const int k0 = pairs.k_chunk[pi] * chunk, tiles = pairs.causal[pi] ? i0 / kTile + 1 : chunk / kTile;
        auto issue = [&](int kt, int buf) {
            const bfloat* kv_tile = kv + (int64_t(w.b) * T + k0 + kt * kTile) * kvs + w.h * kHD;
            load_tile_async(K[buf], kv_tile, kvs);
            load_tile_async(V[buf], kv_tile + w.C, kvs);
            commit_async();
        };
        __syncthreads();
        issue(0, 0);
        for (int kt = 0; kt < tiles; ++kt) {
            const int buf = kt & 1;
            if (kt + 1 < tiles) {
                issue(kt + 1, buf ^ 1);
                wait_async<1>();
            } else {
                wait_async<0>();
            }
            __syncthreads();
            const bool diagonal = pairs.causal[pi] && kt == i0 / kTile;
            float p[8][4], dp[8][4];
            rows_times_rows_t(p, Q, 16 * warp, K[buf], l);
            rows_times_rows_t(dp, dO, 16 * warp, V[buf], l);  // dP = dO V^T
#pragma unroll
            for (int j = 0; j < 8; ++j)
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const int e = i / 2, key = 8 * j + 2 * l.t + i % 2;
                    const float pr = diagonal && key > rows[e] ? 0.0f : __expf(p[j][i] * scale - row_lse[e]);
                    p[j][i] = scale * pr * (dp[j][i] - row_delta[e]);  // dS
                }
            regs_times_rows(g, p, K[buf], l);  // dQ += dS K
            __syncthreads();
        }
    }
    for (int e = 0; e < 2; ++e) {
        if constexpr (kWhole) {  // dq is the first third of dqkv's row
            bfloat* out = bo.dqkv + (int64_t(w.b) * T + t0 + rows[e]) * 3 * w.C + w.h * kHD + 2 * l.t;
            for (int jd = 0; jd < 8; ++jd) st_pair(out + 8 * jd, g[jd][2 * e], g[jd][2 * e + 1]);
        } else {
            float* out = bo.dq + (int64_t(w.b) * T + t0 + rows[e]) * w.C + w.h * kHD + 2 * l.t;
            for (int jd = 0; jd < 8; ++jd) {
                float2 v = *reinterpret_cast<float2*>(out + 8 * jd);
                v.x += g[jd][2 * e], v.y += g[jd][2 * e + 1];
                *reinterpret_cast<float2*>(out + 8 * jd) = v;
            }
        }
    }
}

// grid (B * NH, T / 64): dk and dv of 64 keys of the block. Its two accumulators (dk, dv) beside the score tiles
// took 183 registers: two blocks an SM, 8 warps, latency-bound (Nsight Compute on the H100: 12% occupancy, 1.2
// instructions a cycle). Packing P^T and dS^T into bf16 fragments as they are made brings it to 167, three blocks
// (3 x 56 KB of shared memory), without spilling; bounding it to four (128) spills 196 bytes.
template <bool kWhole>
__global__ void __launch_bounds__(kThreads)
    dkv_kernel(BackwardOut bo, const bfloat* qkv, const bfloat* kv, int64_t kvs, const bfloat* dout, const float* lse,
               const float* delta, int T, int NH, int chunk, ChunkPairs pairs, float scale) {
    extern __shared__ __align__(16) bfloat dkv_smem[];  // K, V, then Q and dO twice: 55 KB (dynamic)
    bfloat* K = dkv_smem;
    bfloat* V = dkv_smem + kTileSmem;
    bfloat* Q[2] = {dkv_smem + 2 * kTileSmem, dkv_smem + 3 * kTileSmem};
    bfloat* dO[2] = {dkv_smem + 4 * kTileSmem, dkv_smem + 5 * kTileSmem};
    __shared__ float tile_lse[2][kTile], tile_delta[2][kTile];
    const Lane l;
    const int warp = threadIdx.x / 32;
    const Where w(NH);
    const int r0 = int(blockIdx.y) * kTile, kchunk = r0 / chunk, j0 = r0 - kchunk * chunk;
    const int keys[2] = {16 * warp + l.g, 16 * warp + l.g + 8};  // this thread's two keys within the tile
    float dk[8][4] = {}, dv[8][4] = {};
    const bfloat* kv_tile = kv + (int64_t(w.b) * T + r0) * kvs + w.h * kHD;
    load_tile(K, kv_tile, kvs);
    load_tile(V, kv_tile + w.C, kvs);
    for (int pi = 0; pi < pairs.count; ++pi) {
        if (pairs.k_chunk[pi] != kchunk) continue;
        const int q0 = pairs.q_chunk[pi] * chunk, first = pairs.causal[pi] ? j0 / kTile : 0, end = chunk / kTile;
        auto issue = [&](int qt, int buf) {
            const int64_t q_row = int64_t(w.b) * T + q0 + qt * kTile;
            load_tile_async(Q[buf], qkv + q_row * 3 * w.C + w.h * kHD, 3 * w.C);
            load_tile_async(dO[buf], dout + q_row * w.C + w.h * kHD, w.C);
            commit_async();
            for (int i = threadIdx.x; i < kTile; i += blockDim.x) {
                const int64_t at = (int64_t(w.b) * NH + w.h) * T + q0 + qt * kTile + i;
                tile_lse[buf][i] = lse[at];
                tile_delta[buf][i] = delta[at];
            }
        };
        __syncthreads();
        if (first < end) issue(first, 0);
        for (int qt = first; qt < end; ++qt) {
            const int buf = (qt - first) & 1;
            if (qt + 1 < end) {
                issue(qt + 1, buf ^ 1);
                wait_async<1>();
            } else {
                wait_async<0>();
            }
            __syncthreads();
            const bool diagonal = pairs.causal[pi] && qt == j0 / kTile;
            float p[8][4], dp[8][4];
            rows_times_rows_t(dp, V, 16 * warp, dO[buf], l);  // dP^T = V dO^T
            rows_times_rows_t(p, K, 16 * warp, Q[buf], l);    // S^T = K Q^T
            // P^T and dS^T go straight into bf16 A fragments as each column pair is done, so the fp32 tiles die
            // early (the same rounding as regs_times_rows's): fewer registers live across the two products
            uint32_t pa[4][4], dsa[4][4];
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                float pr[4], ds[4];
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const int e = i / 2, query = 8 * j + 2 * l.t + i % 2;
                    pr[i] = diagonal && query < keys[e] ? 0.0f : __expf(p[j][i] * scale - tile_lse[buf][query]);
                    ds[i] = scale * pr[i] * (dp[j][i] - tile_delta[buf][query]);
                }
                pa[j / 2][2 * (j % 2)] = pack(pr[0], pr[1]), pa[j / 2][2 * (j % 2) + 1] = pack(pr[2], pr[3]);
                dsa[j / 2][2 * (j % 2)] = pack(ds[0], ds[1]), dsa[j / 2][2 * (j % 2) + 1] = pack(ds[2], ds[3]);
            }
            fragments_times_rows(dv, pa, dO[buf]);  // dV += P^T dO
            fragments_times_rows(dk, dsa, Q[buf]);  // dK += dS^T Q
            __syncthreads();
        }
    }
    for (int e = 0; e < 2; ++e) {
        if constexpr (kWhole) {  // dk and dv are the second and last thirds of dqkv's row
            bfloat* out = bo.dqkv + (int64_t(w.b) * T + r0 + keys[e]) * 3 * w.C + w.C + w.h * kHD + 2 * l.t;
            for (int jd = 0; jd < 8; ++jd) {
                st_pair(out + 8 * jd, dk[jd][2 * e], dk[jd][2 * e + 1]);
                st_pair(out + w.C + 8 * jd, dv[jd][2 * e], dv[jd][2 * e + 1]);
            }
        } else {
            float* out = bo.dkv + (int64_t(w.b) * T + r0 + keys[e]) * 2 * w.C + w.h * kHD + 2 * l.t;
            for (int jd = 0; jd < 8; ++jd) {
                float2 k = *reinterpret_cast<float2*>(out + 8 * jd);
                float2 v = *reinterpret_cast<float2*>(out + w.C + 8 * jd);
                k.x += dk[jd][2 * e], k.y += dk[jd][2 * e + 1];
                v.x += dv[jd][2 * e], v.y += dv[jd][2 * e + 1];
                *reinterpret_cast<float2*>(out + 8 * jd) = k;
                *reinterpret_cast<float2*>(out + w.C + 8 * jd) = v;
            }
        }
    }
}

}  // namespace

bool attention_tiles_apply(DType t, int T, int NH, int HD, int chunk, const void* qkv, const void* kv,
                           int64_t kv_stride) {
    return t == DType::bf16 && HD == kHD && chunk % kTile == 0 && T % kTile == 0 && aligned16(qkv) && aligned16(kv) &&
           kv_stride % 8 == 0;
}

namespace {

constexpr size_t kBackwardSmem = 6 * kTileSmem * sizeof(bfloat);  // over the 48 KB a kernel gets unasked

template <bool kWhole>
void launch_forward(const ForwardOut& fo, const void* qkv, const void* kv, int64_t kv_stride, int B, int T, int NH,
                    int chunk, const ChunkPairs& pairs, float scale, cudaStream_t s) {
    forward_kernel<kWhole><<<dim3(unsigned(B * NH), unsigned(T / kTile)), kThreads, 0, s>>>(
        fo, static_cast<const bfloat*>(qkv), static_cast<const bfloat*>(kv), kv_stride, T, NH, chunk, pairs, scale);
    US_CUDA_CHECK_LAUNCH();
}

template <bool kWhole>
void launch_backward(const BackwardOut& bo, const void* qkv, const void* kv, int64_t kv_stride, const void* dout,
                     const float* lse, const float* delta, int B, int T, int NH, int chunk, const ChunkPairs& pairs,
                     float scale, cudaStream_t s) {
    const dim3 grid(unsigned(B * NH), unsigned(T / kTile));
    static const bool opted_in = [] {
        US_CUDA_CHECK(
            cudaFuncSetAttribute(dq_kernel<kWhole>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kBackwardSmem)));
        US_CUDA_CHECK(
            cudaFuncSetAttribute(dkv_kernel<kWhole>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kBackwardSmem)));
        // shared memory before L1: three dkv blocks (or four dq blocks) of 56 KB share an SM
        for (const void* k :
             {reinterpret_cast<const void*>(dq_kernel<kWhole>), reinterpret_cast<const void*>(dkv_kernel<kWhole>)})
            US_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout,
                                               int(cudaSharedmemCarveoutMaxShared)));
        return true;
    }();
    (void)opted_in;
    const auto* q = static_cast<const bfloat*>(qkv);
    const auto* k = static_cast<const bfloat*>(kv);
    const auto* d = static_cast<const bfloat*>(dout);
    // whole: dq_kernel writes the deltas that dkv_kernel, next on the stream, reads
    dq_kernel<kWhole>
        <<<grid, kThreads, kBackwardSmem, s>>>(bo, q, k, kv_stride, d, lse, delta, T, NH, chunk, pairs, scale);
    US_CUDA_CHECK_LAUNCH();
    dkv_kernel<kWhole><<<grid, kThreads, kBackwardSmem, s>>>(bo, q, k, kv_stride, d, lse, kWhole ? bo.delta : delta, T,
                                                             NH, chunk, pairs, scale);
    US_CUDA_CHECK_LAUNCH();
}

}  // namespace

void attention_tiles_forward(float* acc, float* row_max, float* row_sum, const void* qkv, const void* kv,
                             int64_t kv_stride, int B, int T, int NH, int chunk, const ChunkPairs& pairs, float scale,
                             cudaStream_t s) {
    ForwardOut fo;
    fo.acc = acc, fo.row_max = row_max, fo.row_sum = row_sum;
    launch_forward<false>(fo, qkv, kv, kv_stride, B, T, NH, chunk, pairs, scale, s);
}

void attention_tiles_backward(float* dq, float* dkv, const void* qkv, const void* kv, int64_t kv_stride,
                              const void* dout, const float* lse, const float* delta, int B, int T, int NH, int chunk,
                              const ChunkPairs& pairs, float scale, cudaStream_t s) {
    BackwardOut bo;
    bo.dq = dq, bo.dkv = dkv;
    launch_backward<false>(bo, qkv, kv, kv_stride, dout, lse, delta, B, T, NH, chunk, pairs, scale, s);
}

void attention_tiles_whole_forward(void* out, float* lse, const void* qkv, int B, int T, int NH, int chunk,
                                   const ChunkPairs& pairs, float scale, cudaStream_t s) {
    ForwardOut fo;
    fo.out = static_cast<bfloat*>(out), fo.lse = lse;
    const int C = NH * kHD;
    launch_forward<true>(fo, qkv, static_cast<const bfloat*>(qkv) + C, 3 * C, B, T, NH, chunk, pairs, scale, s);
}

void attention_tiles_whole_backward(void* dqkv, float* delta, const void* qkv, const void* dout, const void* out,
                                    const float* lse, int B, int T, int NH, int chunk, const ChunkPairs& pairs,
                                    float scale, cudaStream_t s) {
    BackwardOut bo;
    bo.dqkv = static_cast<bfloat*>(dqkv), bo.delta = delta, bo.out = static_cast<const bfloat*>(out);
    const int C = NH * kHD;
    launch_backward<true>(bo, qkv, static_cast<const bfloat*>(qkv) + C, 3 * C, dout, lse, nullptr, B, T, NH, chunk,
                          pairs, scale, s);
}

}  // namespace us::cuda
