#include "engine/backend/cpu/small_sgemm.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "engine/backend/cpu/blas_kernel.h"
#include "common/core/check.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define US_SMALL_SGEMM_TILES 1
#endif

namespace us::cpu {

namespace {

constexpr int kDepth = 256;  // k per pass: B's panel is kDepth x kPanelWidth floats
constexpr int kPanelWidth = 16;
constexpr int kLongestTransposedRow = 512;  // floats (see small_sgemm)

#ifdef US_SMALL_SGEMM_TILES
#define US_AVX2_FMA __attribute__((target("avx2,fma")))

constexpr int kTileRows = 6;  // 6 x 16: 12 ymm accumulators, 2 loads of B and 1 broadcast of A per k
constexpr int kLanes = 8;     // floats per ymm

// C[0:MR, 0:8*NV] = alpha * sum_p A(i, p) B(p, j) + beta * C, p in order. A(i, p) lies at a[i * rs + p * cs]:
// rs = lda for A, 1 for A^T (then the MR values of one p are adjacent).
template <bool TransA, int MR, int NV>
US_AVX2_FMA void tile(int k, float alpha, const float* a, ptrdiff_t lda, const float* b, ptrdiff_t ldb, float beta,
                      float* c, ptrdiff_t ldc) {
    const ptrdiff_t rs = TransA ? 1 : lda, cs = TransA ? lda : 1;
    __m256 acc[MR][NV];
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int p = 0; p < k; ++p) {
        const float* bp = b + p * ldb;
        const float* ap = a + p * cs;
        __m256 bv[NV];
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) bv[v] = _mm256_loadu_ps(bp + kLanes * v);
#pragma GCC unroll 6
        for (int r = 0; r < MR; ++r) {
            const __m256 ar = _mm256_broadcast_ss(ap + r * rs);
#pragma GCC unroll 2
            for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(ar, bv[v], acc[r][v]);
        }
    }
    const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) {
            float* cp = c + r * ldc + kLanes * v;
            __m256 x = _mm256_mul_ps(acc[r][v], va);
            if (beta != 0.0f) x = _mm256_fmadd_ps(vb, _mm256_loadu_ps(cp), x);  // beta 0 never reads C
            _mm256_storeu_ps(cp, x);
        }
}

template <bool TransA, int NV>
US_AVX2_FMA void tile_rows(int mr, int k, float alpha, const float* a, ptrdiff_t lda, const float* b, ptrdiff_t ldb,
                           float beta, float* c, ptrdiff_t ldc) {
    switch (mr) {
        case 6:
            return tile<TransA, 6, NV>(k, alpha, a, lda, b, ldb, beta, c, ldc);
        case 5:
            return tile<TransA, 5, NV>(k, alpha, a, lda, b, ldb, beta, c, ldc);
        case 4:
            return tile<TransA, 4, NV>(k, alpha, a, lda, b, ldb, beta, c, ldc);
        case 3:
            return tile<TransA, 3, NV>(k, alpha, a, lda, b, ldb, beta, c, ldc);
        case 2:
            return tile<TransA, 2, NV>(k, alpha, a, lda, b, ldb, beta, c, ldc);
        default:
            return tile<TransA, 1, NV>(k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
}

// The last n % 8 columns, one element at a time.
template <bool TransA>
void columns_left(int m, int j0, int n, int k, float alpha, const float* a, ptrdiff_t lda, const float* b,
                  ptrdiff_t ldb, float beta, float* c, ptrdiff_t ldc) {
    const ptrdiff_t rs = TransA ? 1 : lda, cs = TransA ? lda : 1;
    for (int i = 0; i < m; ++i)
        for (int j = j0; j < n; ++j) {
            float sum = 0.0f;
            for (int p = 0; p < k; ++p) sum += a[i * rs + p * cs] * b[p * ldb + j];
            float& out = c[i * ldc + j];
            out = beta != 0.0f ? alpha * sum + beta * out : alpha * sum;
        }
}

// A panel of B, k x 8*NV, copied contiguous: read in place, its rows would be ldb apart (3 * C floats for q, k, v
// in the activation), which maps them onto a few L1 sets that evict each other.
template <int NV>
US_AVX2_FMA void pack_panel(int k, const float* b, ptrdiff_t ldb, float* panel) {
    for (int p = 0; p < k; ++p)
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v)
            _mm256_storeu_ps(panel + (p * NV + v) * kLanes, _mm256_loadu_ps(b + p * ldb + v * kLanes));
}

// The depth range [lo, hi) that rows [i, i + rows) of C take from A: all of it, or what the causal mask leaves.
struct DepthRange {
    int lo, hi;
};
DepthRange depth_for_rows(const CausalSkip& skip, int i, int rows, int k) {
    switch (skip.kind) {
        case CausalSkip::a_zero_after:
            return {0, std::clamp(i + rows + skip.offset, 0, k)};
        case CausalSkip::a_zero_before:
            return {std::clamp(i - skip.offset, 0, k), k};
        default:
            return {0, k};
    }
}

// Column panels outside (a packed panel of B, at most kDepth x 16 = 16 KiB, stays in L1 while every row tile
// passes over it), row tiles inside; past kDepth the products go on in steps of kDepth, adding into C. Each row tile
// takes only the depth its rows' A is not masked over, and leaves out the column panels its rows do not want.
template <bool TransA>
US_AVX2_FMA void tiled(int m, int n, int k, float alpha, const float* a, ptrdiff_t lda, const float* b, ptrdiff_t ldb,
                       float beta, float* c, ptrdiff_t ldc, float* panel, const CausalSkip& skip) {
    const ptrdiff_t rs = TransA ? 1 : lda, cs = TransA ? lda : 1;
    // The last column any row wants, and whether rows [i, i + rows) want any of columns [j, j + width).
    const int last_column = skip.kind == CausalSkip::wanted_columns_upto ? std::min(n - 1, m - 1 + skip.offset) : n - 1;
    auto wants = [&](int i, int rows, int j, int width) {
        if (skip.kind == CausalSkip::wanted_columns_upto) return j <= i + rows - 1 + skip.offset;
        if (skip.kind == CausalSkip::wanted_columns_from) return j + width - 1 >= i - skip.offset;
        return true;
    };
    for (int p0 = 0; p0 < std::max(k, 1); p0 += kDepth) {
        const int depth = std::min(kDepth, k - p0);
        const float step_beta = p0 == 0 ? beta : 1.0f;
        auto panel_pass = [&]<int NV>(int j) {
            pack_panel<NV>(depth, b + p0 * ldb + j, ldb, panel);
            for (int i = 0; i < m; i += kTileRows) {
                const int rows = std::min(kTileRows, m - i);
                if (!wants(i, rows, j, NV * kLanes)) continue;
                const DepthRange r = depth_for_rows(skip, i, rows, k);
                const int from = std::clamp(r.lo, p0, p0 + depth), to = std::clamp(r.hi, from, p0 + depth);
                tile_rows<TransA, NV>(rows, to - from, alpha, a + i * rs + from * cs, lda,
                                      panel + (from - p0) * NV * kLanes, NV * kLanes, step_beta, c + i * ldc + j, ldc);
            }
        };
        int j = 0;
        for (; j + 2 * kLanes <= n && j <= last_column; j += 2 * kLanes) panel_pass.template operator()<2>(j);
        for (; j + kLanes <= n && j <= last_column; j += kLanes) panel_pass.template operator()<1>(j);
        if (j < n && j <= last_column)
            columns_left<TransA>(m, j, n, depth, alpha, a + p0 * cs, lda, b + p0 * ldb, ldb, step_beta, c, ldc);
    }
}
#endif  // US_SMALL_SGEMM_TILES

// ULTRASCOPE_SMALL_SGEMM=openblas|tiles chooses for a run (to compare the two on one machine). A value it cannot
// take is a UserError; CpuBackend asks for the path when it is made, so that comes at startup, outside any parallel
// region.
SmallSgemmPath default_path() {
    if (const char* chosen = std::getenv("ULTRASCOPE_SMALL_SGEMM"); chosen && *chosen) {
        const std::string name = chosen;
        if (name == "openblas") return SmallSgemmPath::blas;
        if (name == "tiles" && small_sgemm_tiles_supported()) return SmallSgemmPath::tiles;
        throw UserError(
            fmt::format("ULTRASCOPE_SMALL_SGEMM={}: use openblas{}, or unset it", name,
                        small_sgemm_tiles_supported() ? " or tiles" : " (this CPU has no AVX2 + FMA for tiles)"));
    }
#ifdef US_SMALL_SGEMM_TILES
    const bool tiles = small_sgemm_tiles_supported() && !CpuIsa::of_this_cpu().avx512f;
    return tiles ? SmallSgemmPath::tiles : SmallSgemmPath::blas;
#else
    return SmallSgemmPath::blas;
#endif
}

std::atomic<SmallSgemmPath>& current_path() {
    static std::atomic<SmallSgemmPath> path{default_path()};
    return path;
}

}  // namespace

bool small_sgemm_tiles_supported() {
#ifdef US_SMALL_SGEMM_TILES
    return CpuIsa::of_this_cpu().avx2;  // AVX2 and FMA
#else
    return false;
#endif
}

SmallSgemmPath small_sgemm_path() { return current_path().load(std::memory_order_relaxed); }

void set_small_sgemm_path(SmallSgemmPath path) {
    if (path == SmallSgemmPath::tiles && !small_sgemm_tiles_supported())
        throw std::invalid_argument("small_sgemm: the register tiles need AVX2 + FMA, which this CPU does not have");
    current_path().store(path, std::memory_order_relaxed);
}

const char* small_sgemm_path_name(SmallSgemmPath path) {
    return path == SmallSgemmPath::tiles ? "AVX2 register tiles" : "OpenBLAS sgemm";
}

size_t small_sgemm_panel_floats(int k) { return size_t(std::clamp(k, 0, kDepth)) * kPanelWidth; }

void transpose_into(const float* src, int rows, int cols, int ld, float* dst) {
    constexpr int kRowsAtOnce = 16;  // their cache lines stay in L1 while the columns are written out
    for (int r0 = 0; r0 < rows; r0 += kRowsAtOnce) {
        const int r1 = std::min(rows, r0 + kRowsAtOnce);
        for (int j = 0; j < cols; ++j)
            for (int r = r0; r < r1; ++r) dst[size_t(j) * rows + r] = src[size_t(r) * ld + j];
    }
}

void small_sgemm(bool trans_a, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
                 float beta, float* c, int ldc, float* panel, CausalSkip skip) {
    if (m <= 0 || n <= 0) return;
#ifdef US_SMALL_SGEMM_TILES
    // A^T is read in place, a few floats from each of k rows lda apart; past kLongestTransposedRow those rows fall
    // on the same L1 sets and evict each other before the next row tile uses them (naive backward at T = 2048,
    // 1 thread: 812 ms against OpenBLAS's 659), so such products go to OpenBLAS, which packs A.
    if (small_sgemm_path() == SmallSgemmPath::tiles && (!trans_a || lda <= kLongestTransposedRow)) {
        if (trans_a)
            tiled<true>(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, panel, skip);
        else
            tiled<false>(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, panel, skip);
        return;
    }
#endif
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta,
                c, ldc);
}

}  // namespace us::cpu
