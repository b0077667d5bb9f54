// fp32 GEMM on several threads as one single-threaded sgemm per thread on its own slice of C, in one OpenMP
// parallel region (row-major, the cblas argument order). OpenBLAS's own threading shares packed panels between
// its threads and waits for them at every block (spinning, then sched_yield): as fast on an idle machine, but when
// another process takes a core from one thread for a time slice the other spins at every block; sliced, it waits
// once. C is cut along its longer side, so the operand each thread packs again is the smaller one. The slices are
// fixed, so results do not depend on timing. The CPU backend's fp32 GEMMs and the measured sgemm peak (peak.h)
// both run this way.
#pragma once

namespace us::cpu {

void sgemm_sliced(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                  int ldb, float beta, float* c, int ldc, int threads);

}  // namespace us::cpu
