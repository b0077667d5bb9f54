// bf16 GEMM on the CPU: the AVX-512 BF16 kernel, the fp32 fallback through sgemm, and the run-time choice.
// The fast path packs op(A) and op(B) into (k, k+1)-pair panels so that one vdpbf16ps multiplies a broadcast
// pair of A by 16 columns of B; a 12 x 32 block of C stays in 24 zmm accumulators.
//
// [SECTION] kernel choice
// [SECTION] blocking plan and scratch
// [SECTION] avx512-bf16: packing
// [SECTION] avx512-bf16: micro-kernel
// [SECTION] avx512-bf16: driver
// [SECTION] fp32 fallback
#include "engine/backend/cpu/gemm_bf16.h"

#include <cblas.h>
#include <omp.h>

// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* "is/may be used uninitialized", GCC bug
// 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

extern "C" char* openblas_get_corename(void);

// The kernel builds without -march=native and only runs after cpu_supports_avx512_bf16() said yes.
#define US_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
// Packers and the micro-kernel stay separate functions: each call does thousands of cycles of work, and
// profiles then show where the time goes.
#define US_AVX512_BF16_KERNEL US_AVX512_BF16 __attribute__((noinline))

namespace us::cpu {

// --------------------------------------------------------------------------------------------------------
// [SECTION] kernel choice

bool cpu_supports_avx512_bf16() {
#if defined(__x86_64__)
    return __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
}

const char* bf16_gemm_kernel_name(Bf16GemmKernel kernel) {
    switch (kernel) {
        case Bf16GemmKernel::avx512_bf16:
            return "avx512-bf16";
        case Bf16GemmKernel::fp32_sgemm:
            return "fp32-sgemm-fallback";
        default:
            return "automatic";
    }
}

bool openblas_kernel_is_avx512(std::string_view core) {
    std::string lower(core);
    for (char& ch : lower) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    for (std::string_view family : {"skylakex", "cooperlake", "sapphirerapids"})
        if (lower == family) return true;
    return false;
}

Bf16GemmKernel automatic_bf16_gemm_kernel(bool cpu_has_avx512_bf16, std::string_view openblas_core) {
    // Measured (docs/performance.md): on a 16-core Xeon with AVX-512 BF16, OpenBLAS's Cooperlake sgemm on the
    // rounded inputs beat our vdpbf16ps kernel at 1, 8 and 16 threads (bf16 training 0.59-0.79x fp32 with it); on a
    // Zen 4 EPYC, whose OpenBLAS runs AVX2 kernels (Haswell, Zen), the kernel ran 3.2-3.9x OpenBLAS's sgemm on every
    // GPT-2 training shape and bf16 training 2.2x fp32. The 512-bit bf16 dot product wins against a 256-bit sgemm.
    return cpu_has_avx512_bf16 && !openblas_kernel_is_avx512(openblas_core) ? Bf16GemmKernel::avx512_bf16
                                                                            : Bf16GemmKernel::fp32_sgemm;
}

Bf16GemmKernel resolve_bf16_gemm_kernel(Bf16GemmKernel requested) {
    if (requested != Bf16GemmKernel::automatic) return requested;
    // US_BF16_GEMM=avx512 or =sgemm overrides the choice (the kernel only where the CPU has it).
    const char* forced = std::getenv("US_BF16_GEMM");
    if (forced && std::strcmp(forced, "avx512") == 0 && cpu_supports_avx512_bf16()) return Bf16GemmKernel::avx512_bf16;
    if (forced && std::strcmp(forced, "sgemm") == 0) return Bf16GemmKernel::fp32_sgemm;
    static const Bf16GemmKernel chosen =
        automatic_bf16_gemm_kernel(cpu_supports_avx512_bf16(), openblas_get_corename());
    return chosen;
}

namespace {

// What actually runs: an explicit avx512_bf16 request on a CPU without it degrades to the fallback. Sizing
// the scratch and running go through this one function, so they always agree.
Bf16GemmKernel effective_kernel(Bf16GemmKernel requested) {
    const auto kernel = resolve_bf16_gemm_kernel(requested);
    if (kernel == Bf16GemmKernel::avx512_bf16 && !cpu_supports_avx512_bf16()) return Bf16GemmKernel::fp32_sgemm;
    return kernel;
}

// --------------------------------------------------------------------------------------------------------
// [SECTION] blocking plan and scratch
//
// C is cut into tiles of at most mc x nc, spread over the threads; each thread packs its own panels, so no
// barriers are needed and every element of C is summed in the same order whatever the thread count (bitwise
// reproducible). Within a tile the K loop runs in blocks of kc: a 12-row strip of packed A (kc/2 x 12 pairs,
// 18 KiB) stays in L1 while the packed B block (kc x nc) streams from L2. With k <= kc (most layers) a thread
// packs each B block once and reuses it down all its M tiles. With several K blocks the partial sums live in
// an fp32 tile buffer and the last block applies alpha/beta and writes C. Sizes were tuned on Zen 4 over the
// GPT-2 training shapes: taller tiles repack the V-sized streaming operand less often.

constexpr int kMr = 12;              // rows of C per micro-tile: 12 x 2 zmm accumulators + 2 B vectors + 1 broadcast
constexpr int kNr = 32;              // columns per micro-tile: two zmm of 16 fp32
constexpr int kMc = 288;             // most rows per tile, a multiple of kMr
constexpr int kNc = 384;             // most columns per tile, a multiple of kNr
constexpr int kKc = 768;             // K per block, even so that no (k, k+1) pair straddles two blocks
constexpr size_t kAlignFloats = 16;  // 64 bytes

size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }
int ceil_div(int x, int y) { return (x + y - 1) / y; }

struct Blocking {
    int mc = 0, nc = 0,
        kc = 0;  // this call's tile sizes (even splits of m and n, smaller for small problems)
    int m_tiles = 0, n_tiles = 0, k_blocks = 1;
    // Per-thread scratch, sized with the largest tiles so that it does not depend on the thread count.
    size_t pa_floats = 0, pb_floats = 0, buf_floats = 0, thread_floats = 0;
};

Blocking plan_blocking(const GemmArgs& g, int threads) {
    Blocking b;
    b.kc = std::min(kKc, int(round_up(std::max(g.k, 1), 2)));
    b.k_blocks = std::max(1, ceil_div(g.k, b.kc));
    const int mc_max = std::min(kMc, int(round_up(g.m, kMr)));
    const int nc_max = std::min(kNc, int(round_up(g.n, kNr)));
    const size_t pairs = size_t(b.kc / 2);
    b.pa_floats = round_up(size_t(mc_max) * pairs, kAlignFloats);  // one uint32 (a bf16 pair) per float
    b.pb_floats = round_up(size_t(nc_max) * pairs, kAlignFloats);
    b.buf_floats = b.k_blocks > 1 ? round_up(size_t(mc_max) * nc_max, kAlignFloats) : 0;
    b.thread_floats = b.pa_floats + b.pb_floats + b.buf_floats;
    // Tiles of near-equal size (m = 2048 as 7 tiles of 264 and one of 200 rather than 7 of 288 and one of
    // 32); small problems get more, smaller tiles until there are a few per thread (rows first: wide B panels
    // pack better).
    b.m_tiles = ceil_div(g.m, mc_max);
    b.n_tiles = ceil_div(g.n, nc_max);
    while (b.m_tiles * b.n_tiles < 4 * threads && b.m_tiles < ceil_div(g.m, kMr)) b.m_tiles *= 2;
    while (b.m_tiles * b.n_tiles < 4 * threads && b.n_tiles < ceil_div(g.n, kNr)) b.n_tiles *= 2;
    b.mc = int(round_up(ceil_div(g.m, b.m_tiles), kMr));
    b.nc = int(round_up(ceil_div(g.n, b.n_tiles), kNr));
    b.m_tiles = ceil_div(g.m, b.mc);
    b.n_tiles = ceil_div(g.n, b.nc);
    return b;
}

// Threads gemm_bf16 will use: one when called from inside a parallel region (the caller already split the
// work).
int gemm_threads() { return omp_in_parallel() ? 1 : std::max(1, omp_get_max_threads()); }

// --------------------------------------------------------------------------------------------------------
// [SECTION] avx512-bf16: packing
//
// Packed A, per strip of kMr rows: [pair p][row r] uint32 = (A(r, 2p), A(r, 2p+1)), rows past m are zero.
// Packed B, per strip of kNr columns: [pair p][col j] uint32 = (B(2p, j), B(2p+1, j)), columns past n are
// zero. An odd K gets a zero partner in its last pair; nothing past K is ever read (it could be NaN).

// Mask of the first `count` lanes (count in 0..32).
inline uint32_t lanes_mask(int count) { return count >= 32 ? ~0u : (1u << count) - 1u; }

// Transposes a 16 x 16 matrix of uint32 held in 16 zmm (r[i] is row i).
US_AVX512_BF16 inline void transpose_16x16(__m512i r[16]) {
    __m512i t[16];
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    // Now r[4i + c], per 128-bit lane l, holds rows 4i..4i+3 of column 4l + c.
    for (int i = 0; i < 4; ++i) {
        r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int c = 0; c < 4; ++c) {
        const __m512i a = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x88), b = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xdd);
        const __m512i a2 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x88);
        const __m512i b2 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xdd);
        t[c] = _mm512_shuffle_i32x4(a, a2, 0x88);
        t[8 + c] = _mm512_shuffle_i32x4(a, a2, 0xdd);
        t[4 + c] = _mm512_shuffle_i32x4(b, b2, 0x88);
        t[12 + c] = _mm512_shuffle_i32x4(b, b2, 0xdd);
    }
    for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// Interleaves two rows of 32 bf16 (x holds k, y holds k+1) into pairs: lanes 0..15 (`high` false) or 16..31.
US_AVX512_BF16 inline __m512i interleave_pairs(__m512i x, __m512i y, bool high) {
    alignas(64) static constexpr uint16_t lo_idx[32] = {0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
                                                        8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    alignas(64) static constexpr uint16_t hi_idx[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
                                                        24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
    return _mm512_permutex2var_epi16(x, _mm512_load_si512(high ? hi_idx : lo_idx), y);
}

// A stored (m, k), rows contiguous in k: a pair is one unaligned uint32, so 16-row x 16-pair blocks are
// transposed in registers.
US_AVX512_BF16_KERNEL void pack_a_rows(const bf16* a, size_t lda, int rows, int kc, uint32_t* dst) {
    const int pairs = (kc + 1) / 2;
    for (int s = 0; s * kMr < rows; ++s) {
        uint32_t* strip = dst + size_t(s) * pairs * kMr;
        for (int p0 = 0; p0 < pairs; p0 += 16) {
            const __mmask32 kmask = lanes_mask(kc - 2 * p0);
            __m512i r[16];
            for (int i = 0; i < 16; ++i) {
                const int row = s * kMr + i;
                r[i] = i < kMr && row < rows ? _mm512_maskz_loadu_epi16(kmask, a + size_t(row) * lda + 2 * p0)
                                             : _mm512_setzero_si512();
            }
            transpose_16x16(r);
            for (int q = 0; q < 16 && p0 + q < pairs; ++q)
                _mm512_mask_storeu_epi32(strip + size_t(p0 + q) * kMr, __mmask16((1u << kMr) - 1), r[q]);
        }
    }
}

// A stored (k, m), rows contiguous in m: two consecutive rows interleave into the pairs of a strip.
US_AVX512_BF16_KERNEL void pack_a_cols(const bf16* a, size_t lda, int rows, int kc, uint32_t* dst) {
    const int pairs = (kc + 1) / 2;
    for (int p = 0; p < pairs; ++p) {
        const bf16* k0 = a + size_t(2 * p) * lda;
        const bool has_k1 = 2 * p + 1 < kc;
        for (int s = 0; s * kMr < rows; ++s) {
            const __mmask32 mask = lanes_mask(std::min(kMr, rows - s * kMr));
            const __m512i x = _mm512_maskz_loadu_epi16(mask, k0 + s * kMr);
            const __m512i y = has_k1 ? _mm512_maskz_loadu_epi16(mask, k0 + lda + s * kMr) : _mm512_setzero_si512();
            _mm512_mask_storeu_epi32(dst + (size_t(s) * pairs + p) * kMr, __mmask16((1u << kMr) - 1),
                                     interleave_pairs(x, y, false));
        }
    }
}

// B stored (k, n), rows contiguous in n: two consecutive rows interleave into 32 columns of pairs.
US_AVX512_BF16_KERNEL void pack_b_rows(const bf16* b, size_t ldb, int cols, int kc, uint32_t* dst) {
    const int pairs = (kc + 1) / 2;
    for (int u = 0; u * kNr < cols; ++u) {
        const __mmask32 mask = lanes_mask(cols - u * kNr);
        uint32_t* strip = dst + size_t(u) * pairs * kNr;
        for (int p = 0; p < pairs; ++p) {
            const bf16* k0 = b + size_t(2 * p) * ldb + u * kNr;
            const __m512i x = _mm512_maskz_loadu_epi16(mask, k0);
            const __m512i y = 2 * p + 1 < kc ? _mm512_maskz_loadu_epi16(mask, k0 + ldb) : _mm512_setzero_si512();
            _mm512_storeu_si512(strip + size_t(p) * kNr, interleave_pairs(x, y, false));
            _mm512_storeu_si512(strip + size_t(p) * kNr + 16, interleave_pairs(x, y, true));
        }
    }
}

// B stored (n, k), rows contiguous in k (the forward pass, Y = X W^T): 16-column x 16-pair blocks transposed.
US_AVX512_BF16_KERNEL void pack_b_cols(const bf16* b, size_t ldb, int cols, int kc, uint32_t* dst) {
    const int pairs = (kc + 1) / 2;
    for (int u = 0; u * kNr < cols; ++u) {
        uint32_t* strip = dst + size_t(u) * pairs * kNr;
        for (int half = 0; half < 2; ++half) {
            for (int p0 = 0; p0 < pairs; p0 += 16) {
                const __mmask32 kmask = lanes_mask(kc - 2 * p0);
                __m512i r[16];
                for (int i = 0; i < 16; ++i) {
                    const int col = u * kNr + half * 16 + i;
                    r[i] = col < cols ? _mm512_maskz_loadu_epi16(kmask, b + size_t(col) * ldb + 2 * p0)
                                      : _mm512_setzero_si512();
                }
                transpose_16x16(r);
                for (int q = 0; q < 16 && p0 + q < pairs; ++q)
                    _mm512_storeu_si512(strip + size_t(p0 + q) * kNr + half * 16, r[q]);
            }
        }
    }
}

// --------------------------------------------------------------------------------------------------------
// [SECTION] avx512-bf16: micro-kernel

// Where a finished micro-tile goes: C at (row, col) of the full matrix, rows x cols of it valid.
struct TileOut {
    void* c;
    size_t ldc;
    bool c_bf16;
    float alpha, beta;
    int rows, cols;
};

// fp32 -> bf16, round to nearest even, NaN kept quiet: the same bits as f32_to_bf16 (vcvtneps2bf16 would
// flush denormals to zero, which the scalar code and the fallback do not).
US_AVX512_BF16 inline __m256i f32_to_bf16_16(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i rounded =
        _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    const __mmask16 nan =
        _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
}

// C = alpha * acc + beta * C on 16 columns (lanes in `mask`); C's old value is not read when beta == 0.
US_AVX512_BF16 inline void store_c16(const TileOut& out, size_t offset, __mmask16 mask, __m512 acc) {
    __m512 v = _mm512_mul_ps(_mm512_set1_ps(out.alpha), acc);
    if (out.c_bf16) {
        bf16* c = static_cast<bf16*>(out.c) + offset;
        if (out.beta != 0.0f) {
            const __m512i old = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, c)), 16);
            v = _mm512_fmadd_ps(_mm512_set1_ps(out.beta), _mm512_castsi512_ps(old), v);
        }
        _mm256_mask_storeu_epi16(c, mask, f32_to_bf16_16(v));
    } else {
        float* c = static_cast<float*>(out.c) + offset;
        if (out.beta != 0.0f) v = _mm512_fmadd_ps(_mm512_set1_ps(out.beta), _mm512_maskz_loadu_ps(mask, c), v);
        _mm512_mask_storeu_ps(c, mask, v);
    }
}

// acc(MR x 32) = [buf or 0] + sum over `pairs` of A pairs x B pairs; then either back to buf (out == nullptr)
// or through alpha/beta into C. The accumulators are fully unrolled so that they live in registers. Per the
// ISA, vdpbf16ps adds a pair's two (exact) products into fp32 and treats denormals as zero (DAZ, FTZ).
template <int MR>
US_AVX512_BF16_KERNEL void micro_kernel(int pairs, const uint32_t* a, const uint32_t* b, float* buf, int ldbuf,
                                        bool from_buf, const TileOut* out) {
    __m512 acc[MR][2];
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
        acc[r][0] = from_buf ? _mm512_loadu_ps(buf + size_t(r) * ldbuf) : _mm512_setzero_ps();
        acc[r][1] = from_buf ? _mm512_loadu_ps(buf + size_t(r) * ldbuf + 16) : _mm512_setzero_ps();
    }
    for (int p = 0; p < pairs; ++p) {
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b);
        const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + 16);
        _mm_prefetch(reinterpret_cast<const char*>(b + 8 * kNr), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(b + 8 * kNr + 16), _MM_HINT_T0);
#pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) {
            const __m512bh ar = (__m512bh)_mm512_set1_epi32(int(a[r]));
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], ar, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], ar, b1);
        }
        a += MR;
        b += kNr;
    }
    if (!out) {
#pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) {
            _mm512_storeu_ps(buf + size_t(r) * ldbuf, acc[r][0]);
            _mm512_storeu_ps(buf + size_t(r) * ldbuf + 16, acc[r][1]);
        }
        return;
    }
    const __mmask16 m0 = __mmask16(lanes_mask(std::min(out->cols, 16)));
    const __mmask16 m1 = __mmask16(lanes_mask(std::max(out->cols - 16, 0)));
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
        if (r >= out->rows) break;
        store_c16(*out, size_t(r) * out->ldc, m0, acc[r][0]);
        if (m1) store_c16(*out, size_t(r) * out->ldc + 16, m1, acc[r][1]);
    }
}

// --------------------------------------------------------------------------------------------------------
// [SECTION] avx512-bf16: driver

// The operand memory one (tile, K block) packs: A and B as runs of rows. While one block computes, the lines
// of the next are prefetched a slice at a time between micro-kernel calls, so that operands streaming from
// DRAM (the V-sized ones: W_te in dX = dlogits W_te, dlogits in dW_te) arrive without stalling the packers.
struct BlockRegion {
    const char* p = nullptr;
    size_t stride = 0;  // bytes between rows
    size_t bytes = 0;   // bytes per row
    int rows = 0;
};

struct BlockPrefetch {
    BlockRegion region[2];
    int regions = 0, cur = 0, row = 0;
    uintptr_t line = 0, row_end = 0;  // next line of the current row, and the row's last byte

    void add(const char* p, size_t stride, size_t bytes, int rows) {
        if (rows > 0 && bytes > 0) region[regions++] = BlockRegion{p, stride, bytes, rows};
    }
    size_t lines() const {
        size_t n = 0;
        for (int r = 0; r < regions; ++r) n += size_t(region[r].rows) * (region[r].bytes / 64 + 2);
        return n;
    }
    void start_row() {
        const uintptr_t p = reinterpret_cast<uintptr_t>(region[cur].p + size_t(row) * region[cur].stride);
        line = p & ~uintptr_t(63);
        row_end = p + region[cur].bytes - 1;
    }
    void begin() {
        cur = row = 0;
        if (regions) start_row();
    }
    US_AVX512_BF16 void issue(size_t count) {
        for (; count > 0 && cur < regions; --count) {
            _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T1);
            line += 64;
            if (line > row_end) {
                if (++row == region[cur].rows) row = 0, ++cur;
                if (cur < regions) start_row();
            }
        }
    }
};

// Describes what packing (tile t, K block kb) reads; B only when it will be packed (not reused).
BlockPrefetch block_operands(const GemmArgs& g, const Blocking& bl, int t, int kb, bool with_b) {
    const int i0 = (t % bl.m_tiles) * bl.mc, j0 = (t / bl.m_tiles) * bl.nc;
    const int rows = std::min(bl.mc, g.m - i0), cols = std::min(bl.nc, g.n - j0);
    const int k0 = kb * bl.kc, kc = std::min(bl.kc, g.k - k0);
    const char* a = static_cast<const char*>(g.a.data);
    const char* b = static_cast<const char*>(g.b.data);
    BlockPrefetch f;
    if (g.trans_a)
        f.add(a + (size_t(k0) * g.lda + i0) * 2, size_t(g.lda) * 2, size_t(rows) * 2, kc);
    else
        f.add(a + (size_t(i0) * g.lda + k0) * 2, size_t(g.lda) * 2, size_t(kc) * 2, rows);
    if (with_b) {
        if (g.trans_b)
            f.add(b + (size_t(j0) * g.ldb + k0) * 2, size_t(g.ldb) * 2, size_t(kc) * 2, cols);
        else
            f.add(b + (size_t(k0) * g.ldb + j0) * 2, size_t(g.ldb) * 2, size_t(cols) * 2, kc);
    }
    return f;
}

// Runs tiles [first, last) of C (M fastest, so that consecutive tiles share their B panel) on one thread.
US_AVX512_BF16 void run_tiles(const GemmArgs& g, const Blocking& bl, int first, int last, float* scratch) {
    uint32_t* pa = reinterpret_cast<uint32_t*>(scratch);
    uint32_t* pb = reinterpret_cast<uint32_t*>(scratch + bl.pa_floats);
    float* buf = scratch + bl.pa_floats + bl.pb_floats;
    const bf16* a = g.a.b16();
    const bf16* b = g.b.b16();
    const bool c_bf16 = g.c.dtype == DType::bf16;
    void* c = g.c.data;
    const int m_tiles = bl.m_tiles;
    int packed_b_tile = -1;  // the N tile whose (only) K block is in pb
    for (int t = first; t < last; ++t) {
        const int i0 = (t % m_tiles) * bl.mc, j0 = (t / m_tiles) * bl.nc;
        const int rows = std::min(bl.mc, g.m - i0), cols = std::min(bl.nc, g.n - j0);
        const int ldbuf = int(round_up(cols, kNr));
        const int strips = ceil_div(rows, kMr) * ceil_div(cols, kNr);
        for (int kb = 0; kb < bl.k_blocks; ++kb) {
            const int k0 = kb * bl.kc, kc = std::min(bl.kc, g.k - k0), pairs = (kc + 1) / 2;
            if (g.trans_a)
                pack_a_cols(a + size_t(k0) * g.lda + i0, g.lda, rows, kc, pa);
            else
                pack_a_rows(a + size_t(i0) * g.lda + k0, g.lda, rows, kc, pa);
            if (bl.k_blocks > 1 || packed_b_tile != j0 / bl.nc) {
                if (g.trans_b)
                    pack_b_cols(b + size_t(j0) * g.ldb + k0, g.ldb, cols, kc, pb);
                else
                    pack_b_rows(b + size_t(k0) * g.ldb + j0, g.ldb, cols, kc, pb);
                packed_b_tile = j0 / bl.nc;
            }
            BlockPrefetch next;
            if (kb + 1 < bl.k_blocks)
                next = block_operands(g, bl, t, kb + 1, true);
            else if (t + 1 < last) {
                const bool new_b = bl.k_blocks > 1 || (t + 1) / m_tiles != t / m_tiles;
                next = block_operands(g, bl, t + 1, 0, new_b);
            }
            next.begin();
            const size_t per_call = (next.lines() + strips - 1) / strips;
            const bool from_buf = kb > 0, to_c = kb == bl.k_blocks - 1;
            for (int s = 0; s * kMr < rows; ++s) {
                for (int u = 0; u * kNr < cols; ++u) {
                    const int i = i0 + s * kMr, j = j0 + u * kNr;
                    const TileOut out{static_cast<char*>(c) + (size_t(i) * g.ldc + j) * (c_bf16 ? 2 : 4),
                                      size_t(g.ldc),
                                      c_bf16,
                                      g.alpha,
                                      g.beta,
                                      std::min(kMr, g.m - i),
                                      std::min(kNr, g.n - j)};
                    next.issue(per_call);
                    micro_kernel<kMr>(pairs, pa + size_t(s) * pairs * kMr, pb + size_t(u) * pairs * kNr,
                                      buf + size_t(s) * kMr * ldbuf + u * kNr, ldbuf, from_buf, to_c ? &out : nullptr);
                }
            }
        }
    }
}

// Micro-tiles in tile t: the work a tile costs, edges included (they run as padded micro-tiles).
int tile_cost(const GemmArgs& g, const Blocking& bl, int t) {
    const int i0 = (t % bl.m_tiles) * bl.mc, j0 = (t / bl.m_tiles) * bl.nc;
    return ceil_div(std::min(bl.mc, g.m - i0), kMr) * ceil_div(std::min(bl.nc, g.n - j0), kNr);
}

// The contiguous tiles [first, last) of thread `id` of `nt`: each tile goes to the thread whose share of the
// total cost holds the tile's midpoint, so that uneven edge tiles do not leave one thread with more work.
void thread_tiles(const GemmArgs& g, const Blocking& bl, int id, int nt, int& first, int& last) {
    const int tiles = bl.m_tiles * bl.n_tiles;
    int64_t total = 0;
    for (int t = 0; t < tiles; ++t) total += tile_cost(g, bl, t);
    first = last = 0;
    int64_t before = 0;
    for (int t = 0; t < tiles; ++t) {
        const int cost = tile_cost(g, bl, t);
        const int owner = int((2 * before + cost) * nt / (2 * total));
        before += cost;
        if (owner < id)
            first = last = t + 1;
        else if (owner == id)
            last = t + 1;
    }
}

void gemm_avx512_bf16(const GemmArgs& g, float* scratch) {
    const int threads = gemm_threads();
    const Blocking bl = plan_blocking(g, threads);
    const int tiles = bl.m_tiles * bl.n_tiles;
    // 64-byte aligned per-thread regions: packed panels are read with full-width loads.
    float* base = reinterpret_cast<float*>(round_up(reinterpret_cast<uintptr_t>(scratch), 64));
    if (threads == 1 || tiles == 1) {
        run_tiles(g, bl, 0, tiles, base);
        return;
    }
#pragma omp parallel num_threads(std::min(threads, tiles))
    {
        int first, last;
        thread_tiles(g, bl, omp_get_thread_num(), omp_get_num_threads(), first, last);
        run_tiles(g, bl, first, last, base + size_t(omp_get_thread_num()) * bl.thread_floats);
    }
}

// --------------------------------------------------------------------------------------------------------
// [SECTION] fp32 fallback

// Rows x cols of op(X) read from row-major X, widened into a dense fp32 matrix with the same orientation as
// X.
void widen(const bf16* src, int rows, int cols, int ld, float* dst) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) dst[size_t(r) * cols + c] = bf16_to_f32(src[size_t(r) * ld + c]);
}

size_t fallback_scratch_floats(const GemmArgs& g) {
    const size_t a = size_t(g.m) * g.k, b = size_t(g.k) * g.n;
    const size_t c = g.c.dtype == DType::bf16 ? size_t(g.m) * g.n : 0;
    return a + b + c;
}

void gemm_fp32_fallback(const GemmArgs& g, float* scratch) {
    // Stored shapes: A is (m,k) or, transposed, (k,m); B likewise.
    const int a_rows = g.trans_a ? g.k : g.m, a_cols = g.trans_a ? g.m : g.k;
    const int b_rows = g.trans_b ? g.n : g.k, b_cols = g.trans_b ? g.k : g.n;
    float* a = scratch;
    float* b = a + size_t(g.m) * g.k;
    float* c = b + size_t(g.k) * g.n;
    widen(g.a.b16(), a_rows, a_cols, g.lda, a);
    widen(g.b.b16(), b_rows, b_cols, g.ldb, b);
    // BLAS rejects a leading dimension below 1, which the dense copies have when k == 0.
    const int lda = std::max(1, a_cols), ldb = std::max(1, b_cols);
    const auto ta = g.trans_a ? CblasTrans : CblasNoTrans, tb = g.trans_b ? CblasTrans : CblasNoTrans;
    if (g.c.dtype == DType::f32) {
        cblas_sgemm(CblasRowMajor, ta, tb, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, g.c.f32(), g.ldc);
        return;
    }
    bf16* out = g.c.b16();
    if (g.beta != 0.0f) {
#pragma omp parallel for schedule(static)
        for (int i = 0; i < g.m; ++i)
            for (int j = 0; j < g.n; ++j) c[size_t(i) * g.n + j] = bf16_to_f32(out[size_t(i) * g.ldc + j]);
    }
    cblas_sgemm(CblasRowMajor, ta, tb, g.m, g.n, g.k, g.alpha, a, lda, b, ldb, g.beta, c, g.n);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < g.m; ++i)
        for (int j = 0; j < g.n; ++j) out[size_t(i) * g.ldc + j] = f32_to_bf16(c[size_t(i) * g.n + j]);
}

}  // namespace

size_t gemm_bf16_scratch_floats(const GemmArgs& g, Bf16GemmKernel kernel) {
    if (effective_kernel(kernel) == Bf16GemmKernel::fp32_sgemm) return fallback_scratch_floats(g);
    if (g.m == 0 || g.n == 0) return 0;
    const int threads = gemm_threads();
    return plan_blocking(g, threads).thread_floats * size_t(threads) + kAlignFloats;
}

void gemm_bf16(const GemmArgs& g, float* scratch, Bf16GemmKernel kernel) {
    if (g.m == 0 || g.n == 0) return;
    if (effective_kernel(kernel) == Bf16GemmKernel::avx512_bf16)
        gemm_avx512_bf16(g, scratch);
    else
        gemm_fp32_fallback(g, scratch);
}

}  // namespace us::cpu
