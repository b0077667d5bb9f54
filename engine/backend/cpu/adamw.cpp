// AdamW (Loshchilov & Hutter 2019) in the form torch.optim.AdamW computes it, so the golden test can compare
// steps: p *= 1 - lr*wd; m, v updated; p += -(lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps).
#include <cmath>

#include "engine/backend/cpu/cpu_backend.h"

namespace us {

void CpuBackend::adamw(const AdamWArgs& a) {
    const int64_t n = a.params.numel;
    US_ASSERT(a.grads.numel == n && a.m.numel == n && a.v.numel == n, "adamw ranges differ");
    const double bc1 = 1.0 - std::pow(a.beta1, double(a.step));
    const double bc2 = 1.0 - std::pow(a.beta2, double(a.step));
    const float step_size = float(a.lr / bc1);
    const float bc2_sqrt = float(std::sqrt(bc2));
    const float decay = float(1.0 - a.lr * a.weight_decay);
    const float beta1 = float(a.beta1), one_minus_beta1 = float(1.0 - a.beta1);
    const float beta2 = float(a.beta2), one_minus_beta2 = float(1.0 - a.beta2);
    const float eps = float(a.eps);
    float* m = a.m.f32();
    float* v = a.v.f32();
    const bool has_master = !a.master.empty();
    float* w32 = has_master ? a.master.f32() : a.params.f32();
    bf16* w16 = has_master ? a.params.b16() : nullptr;
    // Two loops, not one with a branch on the bf16 copy: a branch in the loop kept it scalar on AVX2.
    auto update = [&](auto* g, auto store_copy) {
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; ++i) {
            const float grad = load(g + i) * a.grad_scale;
            float w = w32[i] * decay;
            // The same operations in the same order as torch's single-tensor AdamW, so roundings agree.
            m[i] = m[i] * beta1 + grad * one_minus_beta1;
            v[i] = v[i] * beta2 + one_minus_beta2 * (grad * grad);
            w = w + -step_size * (m[i] / (std::sqrt(v[i]) / bc2_sqrt + eps));
            w32[i] = w;
            store_copy(i, w);
        }
    };
    with_typed(a.grads, [&](auto* g) {
        if (w16) update(g, [w16](int64_t i, float w) { w16[i] = f32_to_bf16(w); });
        else update(g, [](int64_t, float) {});
    });
}

}  // namespace us
