#include "engine/backend/cpu/peak.h"

#include <cblas.h>
#include <omp.h>

#include <chrono>
#include <vector>

#include "engine/backend/cpu/gemm_bf16.h"
#include "engine/backend/cpu/sgemm_sliced.h"

extern "C" char* openblas_get_corename(void);
extern "C" void openblas_set_num_threads(int);

namespace us::cpu {

std::string openblas_core_name() { return openblas_get_corename(); }

const char* sgemm_form_name(SgemmForm form) {
    return form == SgemmForm::blas_threads ? "OpenBLAS's own threads" : "one sgemm per thread on a slice of C";
}

PeakMeasurement measure_sgemm_peak(int threads, double seconds) {
    using clock = std::chrono::steady_clock;
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    PeakMeasurement best;
    best.threads = threads;
    best.blas_kernel = openblas_core_name();
    const auto start = clock::now();
    const auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - start).count(); };
    // Both ways the engine could run a GEMM on these threads (cpu_backend's fp32 GEMMs are sliced); the best is
    // the ceiling. Sizes go up until the time is spent; each is timed at least twice per form, since a first call
    // also pays for page faults and a core's clock ramp.
    for (int n : {512, 1024, 1536, 2048}) {
        std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
        for (int rep = 0; rep < 8 && (rep < 2 || elapsed() < seconds); ++rep)
            for (SgemmForm form : {SgemmForm::blas_threads, SgemmForm::sliced}) {
                if (form == SgemmForm::sliced && threads == 1) continue;  // the same call
                const auto t0 = clock::now();
                if (form == SgemmForm::blas_threads)
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                                0.0f, c.data(), n);
                else
                    sgemm_sliced(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n, threads);
                const double dt = std::chrono::duration<double>(clock::now() - t0).count();
                const double gflops = 2.0 * n * n * double(n) / dt / 1e9;
                if (gflops > best.gflops) {
                    best.gflops = gflops;
                    best.size = n;
                    best.form = form;
                }
            }
        if (elapsed() > seconds) break;
    }
    return best;
}

PeakMeasurement measure_bf16_gemm_peak(int threads, double seconds) {
    using clock = std::chrono::steady_clock;
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    const Bf16GemmKernel kernel = resolve_bf16_gemm_kernel(Bf16GemmKernel::automatic);
    PeakMeasurement best;
    best.threads = threads;
    best.blas_kernel = bf16_gemm_kernel_name(kernel);
    const auto start = clock::now();
    const auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - start).count(); };
    for (int n : {512, 1024, 1536, 2048}) {
        std::vector<bf16> a(size_t(n) * n, f32_to_bf16(0.5f)), b(size_t(n) * n, f32_to_bf16(0.25f));
        std::vector<float> c(size_t(n) * n);
        GemmArgs g;
        g.m = g.n = g.k = n, g.lda = g.ldb = g.ldc = n;
        g.a = Tensor::of(a.data(), int64_t(a.size())), g.b = Tensor::of(b.data(), int64_t(b.size()));
        g.c = Tensor::of(c.data(), int64_t(c.size()));
        std::vector<float> scratch(gemm_bf16_scratch_floats(g, kernel));
        for (int rep = 0; rep < 8 && (rep < 2 || elapsed() < seconds); ++rep) {
            const auto t0 = clock::now();
            gemm_bf16(g, scratch.data(), kernel);
            const double gflops =
                2.0 * n * n * double(n) / std::chrono::duration<double>(clock::now() - t0).count() / 1e9;
            if (gflops > best.gflops) best.gflops = gflops, best.size = n;
        }
        if (elapsed() > seconds) break;
    }
    return best;
}

}  // namespace us::cpu
