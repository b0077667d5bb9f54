// The injected straggler's extra work (injected_slowdown.h).
#include "engine/parallel/injected_slowdown.h"

#include <chrono>

#include "profiler/record/zones.h"

namespace us {

namespace {
constexpr int kSide = 128;  // the GEMM's matrices: small enough to stop close to the target time
}

InjectedSlowdown::InjectedSlowdown(Backend& backend, double factor) : m_be(backend), m_factor(factor) {
    if (!active()) return;
    const int64_t n = int64_t(kSide) * kSide;
    m_buffers = m_be.allocator().allocate(size_t(3 * n) * 4, MemCategory::workspace, "injected slowdown (--slow-rank)");
    m_a = m_buffers.view(DType::f32, 0, n), m_b = m_buffers.view(DType::f32, n, n),
    m_c = m_buffers.view(DType::f32, 2 * n, n);
    m_be.fill_zero(m_buffers.view(DType::f32, 0, 3 * n));
}

void InjectedSlowdown::after(double seconds) {
    if (!active() || seconds <= 0) return;
    US_PROF_OP_NAME(US_PROF_NAME("injected slowdown (--slow-rank)"));  // the GEMMs' spans carry the name
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>((m_factor - 1.0) * seconds);
    GemmArgs g;
    g.m = g.n = g.k = kSide;
    g.a = m_a, g.lda = kSide, g.b = m_b, g.ldb = kSide, g.c = m_c, g.ldc = kSide;
    while (std::chrono::steady_clock::now() < until) {
        for (int i = 0; i < 8; ++i) m_be.gemm(g);
        m_be.synchronize();  // a GPU's GEMMs are queued: the time is the device's
    }
}

}  // namespace us
