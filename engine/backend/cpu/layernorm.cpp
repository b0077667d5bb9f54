// LayerNorm (Ba et al. 2016), eps 1e-5, statistics in fp32 whatever the storage type.
#include <cmath>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/isa_clones.h"
#include "engine/backend/cpu/lane_reductions.h"
#include "engine/backend/cpu/thread_pieces.h"

namespace us {

namespace {

constexpr float kEps = 1e-5f;

// Rows [lo, hi): statistics, then the normalised, scaled and shifted row.
template <typename T>
US_CPU_INLINE void forward_rows(const T* x, T* y, const T* w, const T* b, float* mu, float* rs, int lo, int hi, int C) {
    for (int n = lo; n < hi; ++n) {
        const T* row = x + size_t(n) * C;
        const float m = cpu::sum_lanes(C, [row](int i) { return load(row + i); }) / float(C);
        const float var = cpu::sum_lanes(C, [row, m](int i) {
            const float d = load(row + i) - m;
            return d * d;
        });
        const float s = 1.0f / std::sqrt(var / float(C) + kEps);
        T* o = y + size_t(n) * C;
#pragma omp simd
        for (int i = 0; i < C; ++i) store(o + i, (load(row + i) - m) * s * load(w + i) + load(b + i));
        mu[n] = m;
        rs[n] = s;
    }
}

// Rows [lo, hi) of backward, dweight and dbias summed into this thread's partials dw, db.
template <typename T>
US_CPU_INLINE void backward_rows(const T* x, const T* dy, T* dx, const T* w, const float* mu, const float* rs,
                                 float* __restrict dw, float* __restrict db, int lo, int hi, int C) {
    for (int n = lo; n < hi; ++n) {
        const T* __restrict xr = x + size_t(n) * C;
        const T* __restrict dyr = dy + size_t(n) * C;
        T* __restrict dxr = dx + size_t(n) * C;
        const float m = mu[n], r = rs[n];
        const float dnorm_mean = cpu::sum_lanes(C, [=](int i) { return load(w + i) * load(dyr + i); }) / float(C);
        const float dnorm_norm_mean =
            cpu::sum_lanes(C, [=](int i) { return load(w + i) * load(dyr + i) * ((load(xr + i) - m) * r); }) / float(C);
#pragma omp simd
        for (int i = 0; i < C; ++i) {
            const float norm = (load(xr + i) - m) * r;
            const float g = load(dyr + i);
            const float dnorm = load(w + i) * g;
            dw[i] += norm * g;
            db[i] += g;
            store(dxr + i, load(dxr + i) + (dnorm - dnorm_mean - norm * dnorm_norm_mean) * r);
        }
    }
}

US_CPU_CLONES void layernorm_rows(const float* x, float* y, const float* w, const float* b, float* mu, float* rs,
                                  int lo, int hi, int C) {
    forward_rows(x, y, w, b, mu, rs, lo, hi, C);
}
US_CPU_CLONES void layernorm_rows(const bf16* x, bf16* y, const bf16* w, const bf16* b, float* mu, float* rs, int lo,
                                  int hi, int C) {
    forward_rows(x, y, w, b, mu, rs, lo, hi, C);
}
US_CPU_CLONES void layernorm_backward_rows(const float* x, const float* dy, float* dx, const float* w, const float* mu,
                                           const float* rs, float* dw, float* db, int lo, int hi, int C) {
    backward_rows(x, dy, dx, w, mu, rs, dw, db, lo, hi, C);
}
US_CPU_CLONES void layernorm_backward_rows(const bf16* x, const bf16* dy, bf16* dx, const bf16* w, const float* mu,
                                           const float* rs, float* dw, float* db, int lo, int hi, int C) {
    backward_rows(x, dy, dx, w, mu, rs, dw, db, lo, hi, C);
}

}  // namespace

void CpuBackend::layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor inp, Tensor weight, Tensor bias, int N,
                                   int C) {
    float* mu = mean.f32();
    float* rs = rstd.f32();
    with_typed(inp, [&](auto* x) {
        using T = std::remove_pointer_t<decltype(x)>;
        T* y = static_cast<T*>(out.data);
        const T* w = static_cast<const T*>(weight.data);
        const T* b = static_cast<const T*>(bias.data);
        cpu::for_each_thread_piece(N, m_threads, [&](int, int64_t lo, int64_t hi) {
            layernorm_rows(x, y, w, b, mu, rs, int(lo), int(hi), C);
        });
    });
}

// Per row: dnorm = dout * w; dinp += (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) * rstd.
// dweight and dbias sum over rows: each thread sums its rows into its own partial, partials are added in thread
// order, so the result does not depend on timing.
void CpuBackend::layernorm_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp, Tensor weight,
                                    Tensor mean, Tensor rstd, int N, int C) {
    const float* mu = mean.f32();
    const float* rs = rstd.f32();
    const int nt = m_threads;
    float* partial = scratch(size_t(nt) * 2 * C);
    with_typed(inp, [&](auto* x) {
        using T = std::remove_pointer_t<decltype(x)>;
        T* dx = static_cast<T*>(dinp.data);
        const T* dy = static_cast<const T*>(dout.data);
        const T* w = static_cast<const T*>(weight.data);
        cpu::for_each_thread_piece(N, nt, [&](int id, int64_t lo, int64_t hi) {
            float* dw = partial + size_t(id) * 2 * C;
            float* db = dw + C;
            for (int i = 0; i < 2 * C; ++i) dw[i] = 0.0f;
            layernorm_backward_rows(x, dy, dx, w, mu, rs, dw, db, int(lo), int(hi), C);
        });
        T* gw = static_cast<T*>(dweight.data);
        T* gb = static_cast<T*>(dbias.data);
        for (int i = 0; i < C; ++i) {
            float sw = 0.0f, sb = 0.0f;
            for (int t = 0; t < nt; ++t) {
                sw += partial[size_t(t) * 2 * C + i];
                sb += partial[size_t(t) * 2 * C + C + i];
            }
            store(gw + i, load(gw + i) + sw);
            store(gb + i, load(gb + i) + sb);
        }
    });
}

}  // namespace us
