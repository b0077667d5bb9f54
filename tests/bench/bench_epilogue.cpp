// Is bias + GeLU worth fusing into the MLP's first GEMM on the CPU? The engine today: one pass writes the bias into
// C, sgemm accumulates onto it (beta 1), then GeLU is a pass of its own over C (the CPU backend's linear_forward and
// gelu_forward). Fused through OpenBLAS, the only way is by row panels: each thread takes its rows panel by panel,
// bias, sgemm and GeLU while the panel is still in cache; but each panel's sgemm packs the weights again. This
// prints both, the best of 10 after a warm-up, 3 rounds, on the c_fc shape of the PyTorch comparison's model
// (M = B*T = 2048, N = 4h = 1024, K = h = 256), one sgemm per thread on its half of the rows as the engine runs it.
// Usage: bench_epilogue [threads, default 2]
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "engine/backend/cpu/fast_math.h"
#include "tests/bench/bench_timing.h"

extern "C" char* openblas_get_corename(void);

namespace {

constexpr int kM = 2048, kN = 1024, kK = 256;

void gelu(const float* x, float* y, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; ++i) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + us::cpu::tanh_fast(0.7978845608f * (v + 0.044715f * v * v * v)));
    }
}

struct Operands {
    std::vector<float> a = std::vector<float>(size_t(kM) * kK, 0.01f), w = std::vector<float>(size_t(kN) * kK, 0.02f),
                       c = std::vector<float>(size_t(kM) * kN), g = std::vector<float>(size_t(kM) * kN),
                       bias = std::vector<float>(kN, 0.1f);
};

// panel 0: bias + sgemm over the thread's rows, then GeLU as its own parallel pass (the engine today)
void run(Operands& o, int threads, int panel) {
#pragma omp parallel num_threads(threads)
    {
        const int id = omp_get_thread_num(), team = omp_get_num_threads();
        const int lo = kM * id / team, hi = kM * (id + 1) / team, step = panel > 0 ? panel : hi - lo;
        for (int r = lo; r < hi; r += step) {
            const int rows = std::min(step, hi - r);
            for (int i = r; i < r + rows; ++i) std::copy(o.bias.begin(), o.bias.end(), o.c.begin() + ptrdiff_t(i) * kN);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, kN, kK, 1.0f, o.a.data() + size_t(r) * kK, kK,
                        o.w.data(), kK, 1.0f, o.c.data() + size_t(r) * kN, kN);
            if (panel > 0) gelu(o.c.data() + size_t(r) * kN, o.g.data() + size_t(r) * kN, size_t(rows) * kN);
        }
    }
    if (panel == 0) {
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int i = 0; i < kM; ++i) gelu(o.c.data() + size_t(i) * kN, o.g.data() + size_t(i) * kN, kN);
    }
}

}  // namespace

int main(int argc, char** argv) {
    const int threads = argc > 1 ? std::max(1, std::atoi(argv[1])) : 2;
    std::printf("bias + sgemm + GeLU, M %d N %d K %d, %d thread(s), OpenBLAS %s: best of 10 (ms), 3 rounds\n", kM, kN,
                kK, threads, openblas_get_corename());
    std::printf("%-28s %9s %9s %9s\n", "", "round 1", "round 2", "round 3");
    Operands o;
    const int panels[] = {0, 32, 64, 128, 256};
    double best[5][3];
    for (int round = 0; round < 3; ++round)
        for (int p = 0; p < 5; ++p) {
            best[p][round] = us::bench::best_seconds(10, [&] { run(o, threads, panels[p]); }) * 1e3;
        }
    for (int p = 0; p < 5; ++p) {
        char label[64];
        if (panels[p] == 0)
            std::snprintf(label, sizeof label, "GEMM, then a GeLU pass");
        else
            std::snprintf(label, sizeof label, "fused by panels of %d rows", panels[p]);
        std::printf("%-28s %9.3f %9.3f %9.3f\n", label, best[p][0], best[p][1], best[p][2]);
    }
}
