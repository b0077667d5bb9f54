// GEMM: fp32 through OpenBLAS sgemm, bf16 through the AVX-512 BF16 kernel (or its fp32 fallback).
#include <cblas.h>
#include <omp.h>

#include <algorithm>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/gemm_bf16.h"
#include "engine/backend/cpu/sgemm_sliced.h"

namespace us {

void CpuBackend::gemm(const GemmArgs& g) {
    US_ASSERT(g.a.dtype == g.b.dtype, "gemm operands differ in dtype ({} vs {})", dtype_name(g.a.dtype),
              dtype_name(g.b.dtype));
    if (g.m == 0 || g.n == 0) return;
    if (g.a.dtype == DType::f32) {
        US_ASSERT(g.c.dtype == DType::f32, "fp32 gemm writes fp32");
        constexpr int64_t kSliceMinFlops = int64_t(1) << 22;  // below it one thread's sgemm is as quick
        if (m_threads > 1 && !omp_in_parallel() && 2 * int64_t(g.m) * g.n * g.k >= kSliceMinFlops)
            cpu::sgemm_sliced(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, g.a.f32(), g.lda, g.b.f32(), g.ldb, g.beta,
                              g.c.f32(), g.ldc, m_threads);
        else
            cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans,
                        g.m, g.n, g.k, g.alpha, g.a.f32(), g.lda, g.b.f32(), g.ldb, g.beta, g.c.f32(), g.ldc);
    } else {
        const auto kernel = cpu::resolve_bf16_gemm_kernel(cpu::Bf16GemmKernel::automatic);
        float* work = scratch(cpu::gemm_bf16_scratch_floats(g, kernel));
        cpu::gemm_bf16(g, work, kernel);
    }
    if (m_progress_hook) m_progress_hook();
}

void CpuBackend::add_bias(Tensor out, Tensor bias, int N, int OC) {
    with_typed(out, [&](auto* o) {
        with_typed(bias, [&](auto* b) {
#pragma omp parallel for schedule(static)
            for (int n = 0; n < N; ++n) {
                auto* row = o + size_t(n) * OC;
                for (int i = 0; i < OC; ++i) store(row + i, load(row + i) + load(b + i));
            }
        });
    });
}

// sgemm with beta 0 first zeroes C in a pass of its own (sgemm_beta), and the bias and residual would be two more:
// instead one pass writes residual + bias into C and sgemm accumulates onto it (beta 1).
void CpuBackend::linear_forward(const GemmArgs& args, Tensor residual, Tensor bias) {
    const bool fp32 = args.a.dtype == DType::f32 && args.c.dtype == DType::f32 &&
                      (bias.empty() || bias.dtype == DType::f32) && (residual.empty() || residual.dtype == DType::f32);
    if (!fp32 || args.beta != 0.0f || args.ldc != args.n || (residual.empty() && bias.empty())) {
        Backend::linear_forward(args, residual, bias);
        return;
    }
    const int M = args.m, N = args.n;
    float* c = args.c.f32();
    const float* r = residual.empty() ? nullptr : residual.f32();
    const float* b = bias.empty() ? nullptr : bias.f32();
#pragma omp parallel for schedule(static)
    for (int row = 0; row < M; ++row) {
        float* __restrict out = c + size_t(row) * N;
        const float* __restrict in = r ? r + size_t(row) * N : nullptr;
        if (in && b)
            for (int i = 0; i < N; ++i) out[i] = in[i] + b[i];
        else if (in)
            for (int i = 0; i < N; ++i) out[i] = in[i];
        else
            for (int i = 0; i < N; ++i) out[i] = b[i];
    }
    GemmArgs g = args;
    g.beta = 1.0f;
    gemm(g);
}

// dbias[o] += sum_n dout[n, o]. Each thread owns a slice of columns, so the sum order is fixed (deterministic).
void CpuBackend::bias_backward(Tensor dbias, Tensor dout, int N, int OC) {
    with_typed(dbias, [&](auto* db) {
        with_typed(dout, [&](auto* d) {
#pragma omp parallel
            {
                const int nt = omp_get_num_threads(), id = omp_get_thread_num();
                const int lo = int(int64_t(OC) * id / nt), hi = int(int64_t(OC) * (id + 1) / nt);
                constexpr int kChunk = 512;
                float acc[kChunk];
                for (int c0 = lo; c0 < hi; c0 += kChunk) {
                    const int c1 = std::min(hi, c0 + kChunk);
                    for (int i = c0; i < c1; ++i) acc[i - c0] = 0.0f;
                    for (int n = 0; n < N; ++n) {
                        const auto* row = d + size_t(n) * OC;
                        for (int i = c0; i < c1; ++i) acc[i - c0] += load(row + i);
                    }
                    for (int i = c0; i < c1; ++i) store(db + i, load(db + i) + acc[i - c0]);
                }
            }
        });
    });
}

}  // namespace us
