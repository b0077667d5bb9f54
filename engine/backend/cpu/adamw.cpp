// AdamW (Loshchilov & Hutter 2019) in the form torch.optim.AdamW computes it, so the golden test can compare
// steps: p *= 1 - lr*wd; m, v updated; p += -(lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps).
#include <cmath>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/isa_clones.h"
#include "engine/backend/cpu/thread_pieces.h"

namespace us {

namespace {

// The step's scalars, in fp32 where torch's kernel has them in fp32.
struct AdamWScalars {
    float grad_scale, decay, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, bc2_sqrt, eps;
};

// Elements [0, n) of one thread's range. Two bodies, not one with a branch on the bf16 copy: a branch in the loop
// kept it scalar on AVX2.
template <typename G, bool kBf16Copy>
US_CPU_INLINE void update_body(const AdamWScalars& k, const G* g, float* w32, bf16* w16, float* m, float* v,
                               int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
        const float grad = load(g + i) * k.grad_scale;
        float w = w32[i] * k.decay;
        // The same operations in the same order as torch's single-tensor AdamW, so roundings agree.
        m[i] = m[i] * k.beta1 + grad * k.one_minus_beta1;
        v[i] = v[i] * k.beta2 + k.one_minus_beta2 * (grad * grad);
        w = w + -k.step_size * (m[i] / (std::sqrt(v[i]) / k.bc2_sqrt + k.eps));
        w32[i] = w;
        if constexpr (kBf16Copy) w16[i] = f32_to_bf16(w);
    }
}

US_CPU_CLONES void update_range(const AdamWScalars& k, const float* g, float* w32, bf16* w16, float* m, float* v,
                                int64_t n) {
    if (w16)
        update_body<float, true>(k, g, w32, w16, m, v, n);
    else
        update_body<float, false>(k, g, w32, w16, m, v, n);
}
US_CPU_CLONES void update_range(const AdamWScalars& k, const bf16* g, float* w32, bf16* w16, float* m, float* v,
                                int64_t n) {
    if (w16)
        update_body<bf16, true>(k, g, w32, w16, m, v, n);
    else
        update_body<bf16, false>(k, g, w32, w16, m, v, n);
}

}  // namespace

void CpuBackend::adamw(const AdamWArgs& a) {
    const int64_t n = a.params.numel;
    US_ASSERT(a.grads.numel == n && a.m.numel == n && a.v.numel == n, "adamw ranges differ");
    const double bc1 = 1.0 - std::pow(a.beta1, double(a.step));
    const double bc2 = 1.0 - std::pow(a.beta2, double(a.step));
    const AdamWScalars k{a.grad_scale,      float(1.0 - a.lr * a.weight_decay),
                         float(a.beta1),    float(1.0 - a.beta1),
                         float(a.beta2),    float(1.0 - a.beta2),
                         float(a.lr / bc1), float(std::sqrt(bc2)),
                         float(a.eps)};
    float* m = a.m.f32();
    float* v = a.v.f32();
    const bool has_master = !a.master.empty();
    float* w32 = has_master ? a.master.f32() : a.params.f32();
    bf16* w16 = has_master ? a.params.b16() : nullptr;
    with_typed(a.grads, [&](auto* g) {
        cpu::for_each_thread_piece(n, m_threads, [&](int, int64_t lo, int64_t hi) {
            update_range(k, g + lo, w32 + lo, w16 ? w16 + lo : nullptr, m + lo, v + lo, hi - lo);
        });
    });
}

}  // namespace us
