#include "engine/backend/cpu/sgemm_sliced.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace us::cpu {

void sgemm_sliced(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                  int ldb, float beta, float* c, int ldc, int threads) {
    const bool by_rows = m >= n;
    const int extent = by_rows ? m : n;
    const auto op_a = trans_a ? CblasTrans : CblasNoTrans, op_b = trans_b ? CblasTrans : CblasNoTrans;
#pragma omp parallel num_threads(threads)
    {
        const int id = omp_get_thread_num(), team = omp_get_num_threads();
        constexpr int kAlign = 16;  // slice edges on the micro-kernel's tile
        const int lo = std::min(extent, int(int64_t(extent) * id / team) / kAlign * kAlign);
        const int hi =
            id + 1 == team ? extent : std::min(extent, int(int64_t(extent) * (id + 1) / team) / kAlign * kAlign);
        if (hi > lo) {
            if (by_rows)  // rows [lo, hi) of C: those rows of op(A), all of B
                cblas_sgemm(CblasRowMajor, op_a, op_b, hi - lo, n, k, alpha,
                            a + (trans_a ? size_t(lo) : size_t(lo) * lda), lda, b, ldb, beta, c + size_t(lo) * ldc,
                            ldc);
            else  // columns [lo, hi) of C: all of A, those columns of op(B)
                cblas_sgemm(CblasRowMajor, op_a, op_b, m, hi - lo, k, alpha, a, lda,
                            b + (trans_b ? size_t(lo) * ldb : size_t(lo)), ldb, beta, c + size_t(lo), ldc);
        }
    }
}

}  // namespace us::cpu
