// GeLU with the tanh approximation (Hendrycks & Gimpel 2016), as GPT-2 and nn.GELU(approximate="tanh"). The tanh
// is compute-bound, so the loops are compiled per instruction set and picked at run time (isa_clones.h).
#include <cmath>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/fast_math.h"
#include "engine/backend/cpu/isa_clones.h"
#include "engine/backend/cpu/thread_pieces.h"

namespace us {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCoeff = 0.044715f;

template <typename T>
US_CPU_INLINE void gelu_forward_body(const T* x, T* y, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
        const float v = load(x + i);
        store(y + i, 0.5f * v * (1.0f + cpu::tanh_fast(kSqrt2OverPi * (v + kCoeff * v * v * v))));
    }
}

template <typename T>
US_CPU_INLINE void gelu_backward_body(const T* x, const T* dy, T* dx, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
        const float v = load(x + i);
        const float u = kSqrt2OverPi * (v + kCoeff * v * v * v);
        const float th = cpu::tanh_fast(u);
        const float sech2 = 1.0f - th * th;
        const float grad = 0.5f * (1.0f + th) + 0.5f * v * sech2 * kSqrt2OverPi * (1.0f + 3.0f * kCoeff * v * v);
        store(dx + i, grad * load(dy + i));
    }
}

US_CPU_CLONES void gelu_forward_range(const float* x, float* y, int64_t n) { gelu_forward_body(x, y, n); }
US_CPU_CLONES void gelu_forward_range(const bf16* x, bf16* y, int64_t n) { gelu_forward_body(x, y, n); }
US_CPU_CLONES void gelu_backward_range(const float* x, const float* dy, float* dx, int64_t n) {
    gelu_backward_body(x, dy, dx, n);
}
US_CPU_CLONES void gelu_backward_range(const bf16* x, const bf16* dy, bf16* dx, int64_t n) {
    gelu_backward_body(x, dy, dx, n);
}

}  // namespace

void CpuBackend::gelu_forward(Tensor out, Tensor inp) {
    with_typed(inp, [&](auto* x) {
        using T = std::remove_pointer_t<decltype(x)>;
        T* y = static_cast<T*>(out.data);
        cpu::for_each_thread_piece(inp.numel, m_threads,
                                   [&](int, int64_t lo, int64_t hi) { gelu_forward_range(x + lo, y + lo, hi - lo); });
    });
}

void CpuBackend::gelu_backward(Tensor dinp, Tensor inp, Tensor dout) {
    with_typed(inp, [&](auto* x) {
        using T = std::remove_pointer_t<decltype(x)>;
        T* dx = static_cast<T*>(dinp.data);
        const T* dy = static_cast<const T*>(dout.data);
        cpu::for_each_thread_piece(inp.numel, m_threads, [&](int, int64_t lo, int64_t hi) {
            gelu_backward_range(x + lo, dy + lo, dx + lo, hi - lo);
        });
    });
}

}  // namespace us
