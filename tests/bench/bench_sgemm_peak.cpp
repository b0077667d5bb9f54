// Prints the measured sgemm peak of the linked BLAS on N threads as one JSON line: the denominator of CPU MFU.
//   build/bin/bench_sgemm_peak [threads] [seconds]   (2 s by default; the trainer measures for 0.3 s at its start)
#include <cstdio>
#include <cstdlib>

#include "engine/backend/cpu/blas_kernel.h"
#include "engine/backend/cpu/peak.h"

int main(int argc, char** argv) {
    us::cpu::ensure_openblas_kernel(argv);  // the kernels the trainer runs on (blas_kernel.h)
    const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
    const auto p = us::cpu::measure_sgemm_peak(threads, argc > 2 ? std::atof(argv[2]) : 2.0);
    std::printf("{\"threads\": %d, \"gflops\": %.1f, \"n\": %d, \"blas_kernel\": \"%s\", \"form\": \"%s\"}\n",
                p.threads, p.gflops, p.size, p.blas_kernel.c_str(), us::cpu::sgemm_form_name(p.form));
    return 0;
}
