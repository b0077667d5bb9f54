// Benchmark of the bf16 GEMM kernels against OpenBLAS sgemm on GPT-2 training shapes (m = B*T = 2048,
// C = 256 and 768, V = 50304) at 1 and 2 threads (or those given), as measured GFLOP/s: 2*m*n*k / best of the
// repetitions. Usage: bench_gemm [repetitions, default 3] [only shapes whose name contains this, e.g. "fwd" or "lm"; ""
// all]
//                   [threads..., default 1 2]
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/cpu/blas_kernel.h"
#include "engine/backend/cpu/gemm_bf16.h"
#include "tests/bench/bench_timing.h"

extern "C" char* openblas_get_corename(void);
extern "C" void openblas_set_num_threads(int);

using us::bench::best_seconds;
using us::bf16;
using us::GemmArgs;
using us::Tensor;
using us::cpu::Bf16GemmKernel;

namespace {

constexpr int kM = 2048;  // B*T
constexpr int kV = 50304;

struct Shape {
    const char* name;
    bool trans_a, trans_b;
    int m, n, k;
    float beta;
};

// The three GEMMs of each training layer type: forward Y = X W^T, backward dX = dY W, dW += dY^T X.
std::vector<Shape> training_shapes(int C) {
    return {
        {"fwd qkv   X W^T", false, true, kM, 3 * C, C, 0.0f},  {"fwd fc    X W^T", false, true, kM, 4 * C, C, 0.0f},
        {"fwd proj  X W^T", false, true, kM, C, 4 * C, 0.0f},  {"fwd lm    X W^T", false, true, kM, kV, C, 0.0f},
        {"bwd dX fc dY W ", false, false, kM, C, 4 * C, 0.0f}, {"bwd dX lm dY W ", false, false, kM, C, kV, 0.0f},
        {"bwd dW fc dY^T X", true, false, 4 * C, C, kM, 1.0f}, {"bwd dW lm dY^T X", true, false, kV, C, kM, 1.0f},
    };
}

struct Operands {
    std::vector<float> a32, b32, c32;
    std::vector<bf16> a16, b16;
    std::vector<float> scratch;
};

void fill(const Shape& s, Operands& o) {
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    const size_t a_size = size_t(s.m) * s.k, b_size = size_t(s.k) * s.n;
    o.a32.resize(a_size);
    o.b32.resize(b_size);
    o.a16.resize(a_size);
    o.b16.resize(b_size);
    for (size_t i = 0; i < a_size; ++i) o.a16[i] = us::f32_to_bf16(uni(rng)), o.a32[i] = us::bf16_to_f32(o.a16[i]);
    for (size_t i = 0; i < b_size; ++i) o.b16[i] = us::f32_to_bf16(uni(rng)), o.b32[i] = us::bf16_to_f32(o.b16[i]);
    o.c32.assign(size_t(s.m) * s.n, 0.0f);
}

double gflops(const Shape& s, double seconds) { return 2.0 * s.m * s.n * s.k / seconds * 1e-9; }

double time_sgemm(const Shape& s, Operands& o, int reps) {
    const int lda = s.trans_a ? s.m : s.k, ldb = s.trans_b ? s.k : s.n;
    return best_seconds(reps, [&] {
        cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans, s.trans_b ? CblasTrans : CblasNoTrans, s.m,
                    s.n, s.k, 1.0f, o.a32.data(), lda, o.b32.data(), ldb, s.beta, o.c32.data(), s.n);
    });
}

double time_bf16(const Shape& s, Operands& o, Bf16GemmKernel kernel, int reps) {
    GemmArgs g;
    g.trans_a = s.trans_a, g.trans_b = s.trans_b;
    g.m = s.m, g.n = s.n, g.k = s.k;
    g.beta = s.beta;
    g.a = Tensor::of(o.a16.data(), int64_t(o.a16.size()));
    g.lda = s.trans_a ? s.m : s.k;
    g.b = Tensor::of(o.b16.data(), int64_t(o.b16.size()));
    g.ldb = s.trans_b ? s.k : s.n;
    g.c = Tensor::of(o.c32.data(), int64_t(o.c32.size()));
    g.ldc = s.n;
    o.scratch.resize(std::max(o.scratch.size(), us::cpu::gemm_bf16_scratch_floats(g, kernel)));
    return best_seconds(reps, [&] { us::cpu::gemm_bf16(g, o.scratch.data(), kernel); });
}

}  // namespace

int main(int argc, char** argv) {
    us::cpu::ensure_openblas_kernel(argv);  // the kernels the trainer runs on (blas_kernel.h)
    const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
    const std::string filter = argc > 2 ? argv[2] : "";
    std::vector<int> thread_counts;
    for (int i = 3; i < argc; ++i) thread_counts.push_back(std::max(1, std::atoi(argv[i])));
    if (thread_counts.empty()) thread_counts = {1, 2};
    const bool have_avx512 = us::cpu::cpu_supports_avx512_bf16();
    const int max_threads = omp_get_max_threads();
    std::printf("bf16 GEMM benchmark: measured GFLOP/s = 2*m*n*k / best of %d runs (after 1 warm-up)\n", reps);
    std::printf("OpenBLAS core: %s | OpenMP max threads: %d | avx512-bf16 on this CPU: %s | m = B*T = %d, V = %d\n",
                openblas_get_corename(), max_threads, have_avx512 ? "yes" : "no", kM, kV);
    std::printf(
        "C columns: fp32 (beta 0 for forward/dX, beta 1 for dW); sgemm runs on the same bf16 values in "
        "fp32\n\n");
    std::printf("%-4s %-17s %6s %6s %6s %3s | %9s %11s %9s | %9s\n", "C", "gemm", "m", "n", "k", "thr", "sgemm",
                "avx512-bf16", "fallback", "bf16/sgemm");
    Operands o;
    for (int C : {256, 768}) {
        for (const Shape& s : training_shapes(C)) {
            if (std::string(s.name).find(filter) == std::string::npos) continue;
            fill(s, o);
            for (int threads : thread_counts) {
                omp_set_num_threads(threads);
                openblas_set_num_threads(threads);
                const double sg = gflops(s, time_sgemm(s, o, reps));
                const double fast = have_avx512 ? gflops(s, time_bf16(s, o, Bf16GemmKernel::avx512_bf16, reps)) : 0.0;
                const double slow = gflops(s, time_bf16(s, o, Bf16GemmKernel::fp32_sgemm, reps));
                std::printf("%-4d %-17s %6d %6d %6d %3d | %9.1f %11.1f %9.1f | %9.2fx\n", C, s.name, s.m, s.n, s.k,
                            threads, sg, fast, slow, fast / sg);
                std::fflush(stdout);
            }
        }
    }
    omp_set_num_threads(max_threads);
    openblas_set_num_threads(max_threads);
    return 0;
}
