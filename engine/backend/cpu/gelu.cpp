// GeLU with the tanh approximation (Hendrycks & Gimpel 2016), as GPT-2 and nn.GELU(approximate="tanh").
#include <cmath>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/fast_math.h"

namespace us {

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCoeff = 0.044715f;
}  // namespace

void CpuBackend::gelu_forward(Tensor out, Tensor inp) {
    with_typed(inp, [&](auto* x) {
        using T = std::remove_pointer_t<decltype(x)>;
        T* y = static_cast<T*>(out.data);
        const int64_t n = inp.numel;
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; ++i) {
            const float v = load(x + i);
            store(y + i, 0.5f * v * (1.0f + cpu::tanh_fast(kSqrt2OverPi * (v + kCoeff * v * v * v))));
        }
    });
}

void CpuBackend::gelu_backward(Tensor dinp, Tensor inp, Tensor dout) {
    with_typed(inp, [&](auto* x) {
        using T = std::remove_pointer_t<decltype(x)>;
        T* dx = static_cast<T*>(dinp.data);
        const T* dy = static_cast<const T*>(dout.data);
        const int64_t n = inp.numel;
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; ++i) {
            const float v = load(x + i);
            const float u = kSqrt2OverPi * (v + kCoeff * v * v * v);
            const float th = cpu::tanh_fast(u);
            const float sech2 = 1.0f - th * th;
            const float grad = 0.5f * (1.0f + th) + 0.5f * v * sech2 * kSqrt2OverPi * (1.0f + 3.0f * kCoeff * v * v);
            store(dx + i, grad * load(dy + i));
        }
    });
}

}  // namespace us
