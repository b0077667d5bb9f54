// The attention's products on one thread: C = alpha * op(A) B + beta * C, fp32, row-major, B not transposed.
// They are small (a 64-row block of a head against at most the sequence; inner dimension the head size, the block,
// or the keys or queries a block sees) and many (several per block per head). OpenBLAS packs both operands again at
// every call and clears C in a pass of its own; in the attention they ran at about 40% of the sgemm peak. With
// AVX2 + FMA a register tile of 6 x 16 accumulators reads A where it lies and B from a copied 16-column panel that
// every row tile reuses; the attention passes B contiguous along its columns (it transposes K, V, Q or dO once per
// head or pair where it needs their transpose). Other CPUs go on through cblas_sgemm: on AVX-512 OpenBLAS uses zmm,
// and the tiles have not been measured there; so do CPUs without AVX2 + FMA, and products whose A^T rows are long
// (small_sgemm.cpp). Deterministic: the same call gives the same bits (k sums in order within each 256-deep pass,
// the passes added in order).
#pragma once

#include <cstddef>

namespace us::cpu {

enum class SmallSgemmPath { tiles, blas };

// What a causal mask lets a product leave out, for each row i of C (offset: the row's position minus its index, or
// the like). The tiles skip whole tiles at a time; OpenBLAS, and the tiles' last n % 8 columns, compute it all,
// which gives the same C wherever C is wanted. So A must hold stored zeros where a skip says it is zero (they are
// read on those paths), and a caller must read only the entries of C it wanted.
struct CausalSkip {
    enum Kind {
        none,
        wanted_columns_upto,  // only C(i, j) for j <= i + offset is wanted: the rest may be left unwritten
        wanted_columns_from,  // only C(i, j) for j >= i - offset is wanted: the rest may be left unwritten
        a_zero_after,         // op(A)(i, p) = 0 for p > i + offset
        a_zero_before,        // op(A)(i, p) = 0 for p < i - offset
    } kind = none;
    int offset = 0;

    // `kind` on a causal (diagonal) block; nothing to leave out on a block whose rows see every key.
    static CausalSkip if_causal(bool causal, Kind kind, int offset) {
        return causal ? CausalSkip{kind, offset} : CausalSkip{};
    }
};

// op(A) is A (m x k, leading dimension lda) or, with trans_a, A^T for A stored (k x m). B is (k x n), ldb. `panel`
// is small_sgemm_panel_floats(k) floats of the caller's scratch: the tiles copy each 16-column panel of B there,
// contiguous (in place its rows would be ldb apart, 3 * C floats in the attention, and evict each other from L1).
void small_sgemm(bool trans_a, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
                 float beta, float* c, int ldc, float* panel, CausalSkip skip = {});
size_t small_sgemm_panel_floats(int k);

// dst (cols x rows, row-major) = src^T for src (rows x cols) with leading dimension ld: K^T or V^T once per head.
void transpose_into(const float* src, int rows, int cols, int ld, float* dst);

// The path small_sgemm takes: tiles when the CPU has AVX2 + FMA and no AVX-512F, else blas. Setting it (benchmarks
// and tests, before any parallel region calls small_sgemm) compares the two in one process; tiles needs AVX2 + FMA.
SmallSgemmPath small_sgemm_path();
bool small_sgemm_tiles_supported();
void set_small_sgemm_path(SmallSgemmPath path);
const char* small_sgemm_path_name(SmallSgemmPath path);

}  // namespace us::cpu
