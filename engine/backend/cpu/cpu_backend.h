// The CPU backend: GEMMs through OpenBLAS (fp32) or the AVX-512 BF16 kernel (bf16), every other op a plain loop
// parallelised with OpenMP. One file per op beside this one, with the same names as the CUDA backend's files.
#pragma once

#include <string>

#include "engine/backend/backend.h"

namespace us {

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(int threads);
    std::string_view name() const override { return "cpu"; }
    std::string device_description() const override;
    int threads() const { return m_threads; }

    US_BACKEND_OPS(US_BACKEND_DECLARE_OVERRIDE)
    void linear_forward(const GemmArgs& args, Tensor residual, Tensor bias) override;

    // Scratch memory for ops (per-thread attention tiles, bf16 GEMM packing): one tracked `workspace`
    // allocation that only ever grows, so the steady state allocates nothing.
    float* scratch(size_t floats);

    // The cos/sin table for RoPE at positions [0, T), dims [0, HD/2): (T, HD/2) each, built once per shape.
    const float* rope_table(int T, int HD);

private:
    int m_threads;
    Allocation m_scratch;
    Allocation m_rope;
    int m_rope_T = 0, m_rope_HD = 0;
    double m_deferred_sum = 0.0;  // sum_deferred's total
};

}  // namespace us
