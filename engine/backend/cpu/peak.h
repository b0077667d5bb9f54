// The CPU's measured peak: the best sgemm GFLOP/s of the linked BLAS on the given threads, over square sizes
// large enough to be compute-bound, with OpenBLAS threading one call and with one call per thread on slices of C
// (what the engine's fp32 GEMMs do: sgemm_sliced.h), whichever is faster. docs/formulas.md defines a CPU's MFU
// against this figure.
#pragma once

#include <string>

namespace us::cpu {

enum class SgemmForm { blas_threads, sliced };
const char* sgemm_form_name(SgemmForm form);

struct PeakMeasurement {
    double gflops = 0.0;  // best achieved
    int size = 0;         // n of the n x n x n sgemm that achieved it
    int threads = 0;
    SgemmForm form = SgemmForm::blas_threads;  // how the best call ran
    std::string blas_kernel;                   // OpenBLAS core name (e.g. Cooperlake, Haswell)
};

// Takes about `seconds` of wall time (more on a slow machine: each size up to the first past it runs twice).
// Sets the BLAS thread count to `threads` and leaves it so.
PeakMeasurement measure_sgemm_peak(int threads, double seconds = 0.5);
// The same for the engine's bf16 GEMM path (gemm_bf16.h, the kernel `automatic` resolves to; blas_kernel names it):
// a bf16 run's ceiling where the AVX-512 BF16 kernel outruns sgemm.
PeakMeasurement measure_bf16_gemm_peak(int threads, double seconds = 0.5);

std::string openblas_core_name();

}  // namespace us::cpu
