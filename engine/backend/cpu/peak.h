// The CPU's measured peak: the best sgemm GFLOP/s of the linked BLAS on the given threads, over square sizes
// large enough to be compute-bound. docs/formulas.md defines a CPU's MFU against this figure.
#pragma once

#include <string>

namespace us::cpu {

struct PeakMeasurement {
    double gflops = 0.0;   // best achieved
    int size = 0;          // n of the n x n x n sgemm that achieved it
    int threads = 0;
    std::string blas_kernel;  // OpenBLAS core name (e.g. Cooperlake, Haswell)
};

// Takes about `seconds` of wall time. Sets the BLAS thread count to `threads` and leaves it so.
PeakMeasurement measure_sgemm_peak(int threads, double seconds = 0.5);

std::string openblas_core_name();

}  // namespace us::cpu
