#include "engine/backend/cpu/peak.h"

#include <cblas.h>
#include <omp.h>

#include <chrono>
#include <vector>

extern "C" char* openblas_get_corename(void);
extern "C" void openblas_set_num_threads(int);

namespace us::cpu {

std::string openblas_core_name() { return openblas_get_corename(); }

PeakMeasurement measure_sgemm_peak(int threads, double seconds) {
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    PeakMeasurement best;
    best.threads = threads;
    best.blas_kernel = openblas_core_name();
    const auto start = std::chrono::steady_clock::now();
    for (int n : {512, 768, 1024, 1536}) {
        std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
        for (int rep = 0; rep < 3; ++rep) {
            const auto t0 = std::chrono::steady_clock::now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                        c.data(), n);
            const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            const double gflops = 2.0 * n * n * double(n) / dt / 1e9;
            if (gflops > best.gflops) {
                best.gflops = gflops;
                best.size = n;
            }
        }
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds) break;
    }
    return best;
}

}  // namespace us::cpu
