#include "engine/backend/cpu/cpu_backend.h"

#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include <cmath>
#include <thread>

#include "engine/backend/cpu/blas_kernel.h"
#include "engine/backend/cpu/gemm_bf16.h"
#include "engine/backend/cpu/small_sgemm.h"

extern "C" char* openblas_get_corename(void);
extern "C" void openblas_set_num_threads(int);

namespace us {

CpuBackend::CpuBackend(int threads) {
    m_threads = threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()));
    omp_set_num_threads(m_threads);
    openblas_set_num_threads(m_threads);
    m_allocator = std::make_unique<TrackedAllocator>(make_host_memory());
    cpu::small_sgemm_path();  // ULTRASCOPE_SMALL_SGEMM is read (and refused, if it must be) here, not inside an op
}

std::string CpuBackend::device_description() const {
    const auto kernel = cpu::resolve_bf16_gemm_kernel(cpu::Bf16GemmKernel::automatic);
    const std::string note = cpu::openblas_kernel_note();
    return fmt::format("cpu ({} threads, OpenBLAS {} kernel{}, bf16 GEMM {}, attention products {})", m_threads,
                       openblas_get_corename(), note.empty() ? "" : " (" + note + ")",
                       cpu::bf16_gemm_kernel_name(kernel), cpu::small_sgemm_path_name(cpu::small_sgemm_path()));
}

float* CpuBackend::scratch(size_t floats) {
    if (m_scratch.bytes() < floats * sizeof(float)) {
        m_scratch.reset();
        m_scratch = m_allocator->allocate(floats * sizeof(float), MemCategory::workspace, "cpu op scratch");
    }
    return static_cast<float*>(m_scratch.data());
}

const float* CpuBackend::rope_table(int T, int HD) {
    if (T != m_rope_T || HD != m_rope_HD) {
        const int half = HD / 2;
        m_rope.reset();
        m_rope = m_allocator->allocate(size_t(2) * T * half * sizeof(float), MemCategory::workspace, "rope table");
        float* cos_table = static_cast<float*>(m_rope.data());
        float* sin_table = cos_table + size_t(T) * half;
        for (int t = 0; t < T; ++t)
            for (int i = 0; i < half; ++i) {
                // theta_i = 10000^(-2i/HD), computed in double and rounded once.
                const double angle = double(t) * std::pow(10000.0, -2.0 * i / double(HD));
                cos_table[size_t(t) * half + i] = float(std::cos(angle));
                sin_table[size_t(t) * half + i] = float(std::sin(angle));
            }
        m_rope_T = T;
        m_rope_HD = HD;
    }
    return static_cast<const float*>(m_rope.data());
}

}  // namespace us
