// Causal multi-head attention, one (batch, head) pair per task: the head's q, k, v are gathered into fp32 tiles,
// the two products go through sgemm (OpenBLAS runs single-threaded inside the parallel region), and the softmax
// runs on the tile. Scale 1/sqrt(HD). With `probs` empty the probabilities are not kept (selective recompute)
// and backward recomputes them from q and k.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "engine/backend/cpu/cpu_backend.h"

namespace us {

namespace {

// Per-thread tiles: P and dP (T,T), and q, k, v, o/do, dq, dk, dv (T,HD).
size_t tile_floats(int T, int HD) { return 2 * size_t(T) * T + 7 * size_t(T) * HD; }

template <typename X>
void gather_head(const X* src, int T, int HD, size_t row_stride, float* dst) {
    for (int t = 0; t < T; ++t)
        for (int i = 0; i < HD; ++i) dst[size_t(t) * HD + i] = load(src + t * row_stride + i);
}

template <typename X>
void scatter_head(const float* src, int T, int HD, size_t row_stride, X* dst) {
    for (int t = 0; t < T; ++t)
        for (int i = 0; i < HD; ++i) store(dst + t * row_stride + i, src[size_t(t) * HD + i]);
}

// P = causal_softmax(scale * Q K^T), rows t attend to positions <= t; the masked upper triangle is zero.
void causal_probs(const float* q, const float* k, int T, int HD, float scale, float* P) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, HD, scale, q, HD, k, HD, 0.0f, P, T);
    for (int t = 0; t < T; ++t) {
        float* row = P + size_t(t) * T;
        float maxv = row[0];
        for (int j = 1; j <= t; ++j) maxv = std::max(maxv, row[j]);
        float sum = 0.0f;
        for (int j = 0; j <= t; ++j) {
            row[j] = std::exp(row[j] - maxv);
            sum += row[j];
        }
        const float inv = 1.0f / sum;
        for (int j = 0; j <= t; ++j) row[j] *= inv;
        for (int j = t + 1; j < T; ++j) row[j] = 0.0f;
    }
}

}  // namespace

void CpuBackend::attention_forward(Tensor out, Tensor probs, Tensor qkv, int B, int T, int NH, int HD) {
    const int C = NH * HD;
    const float scale = 1.0f / std::sqrt(float(HD));
    const size_t per_thread = tile_floats(T, HD);
    float* tiles = scratch(per_thread * size_t(m_threads));
    with_typed(qkv, [&](auto* x) {
        using X = std::remove_pointer_t<decltype(x)>;
        X* y = static_cast<X*>(out.data);
        X* saved = probs.empty() ? nullptr : static_cast<X*>(probs.data);
#pragma omp parallel for schedule(dynamic, 1) num_threads(m_threads)
        for (int bh = 0; bh < B * NH; ++bh) {
            const int b = bh / NH, h = bh % NH;
            float* P = tiles + per_thread * size_t(omp_get_thread_num());
            float* q = P + 2 * size_t(T) * T;
            float* k = q + size_t(T) * HD;
            float* v = k + size_t(T) * HD;
            float* o = v + size_t(T) * HD;
            const X* base = x + size_t(b) * T * 3 * C + size_t(h) * HD;
            gather_head(base, T, HD, 3 * C, q);
            gather_head(base + C, T, HD, 3 * C, k);
            gather_head(base + 2 * C, T, HD, 3 * C, v);
            causal_probs(q, k, T, HD, scale, P);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, HD, T, 1.0f, P, T, v, HD, 0.0f, o, HD);
            scatter_head(o, T, HD, C, y + size_t(b) * T * C + size_t(h) * HD);
            if (saved) {
                X* dst = saved + size_t(bh) * T * T;
                for (size_t i = 0; i < size_t(T) * T; ++i) store(dst + i, P[i]);
            }
        }
    });
}

void CpuBackend::attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor probs, int B, int T, int NH,
                                    int HD) {
    const int C = NH * HD;
    const float scale = 1.0f / std::sqrt(float(HD));
    const size_t per_thread = tile_floats(T, HD);
    float* tiles = scratch(per_thread * size_t(m_threads));
    with_typed(qkv, [&](auto* x) {
        using X = std::remove_pointer_t<decltype(x)>;
        X* dx = static_cast<X*>(dqkv.data);
        const X* dy = static_cast<const X*>(dout.data);
        const X* saved = probs.empty() ? nullptr : static_cast<const X*>(probs.data);
#pragma omp parallel for schedule(dynamic, 1) num_threads(m_threads)
        for (int bh = 0; bh < B * NH; ++bh) {
            const int b = bh / NH, h = bh % NH;
            float* P = tiles + per_thread * size_t(omp_get_thread_num());
            float* dP = P + size_t(T) * T;
            float* q = dP + size_t(T) * T;
            float* k = q + size_t(T) * HD;
            float* v = k + size_t(T) * HD;
            float* dO = v + size_t(T) * HD;
            float* dq = dO + size_t(T) * HD;
            float* dk = dq + size_t(T) * HD;
            float* dv = dk + size_t(T) * HD;
            const X* base = x + size_t(b) * T * 3 * C + size_t(h) * HD;
            gather_head(base, T, HD, 3 * C, q);
            gather_head(base + C, T, HD, 3 * C, k);
            gather_head(base + 2 * C, T, HD, 3 * C, v);
            gather_head(dy + size_t(b) * T * C + size_t(h) * HD, T, HD, C, dO);
            if (saved) {
                const X* src = saved + size_t(bh) * T * T;
                for (size_t i = 0; i < size_t(T) * T; ++i) P[i] = load(src + i);
            } else {
                causal_probs(q, k, T, HD, scale, P);
            }
            // dV = P^T dO ; dP = dO V^T
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, HD, T, 1.0f, P, T, dO, HD, 0.0f, dv, HD);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, HD, 1.0f, dO, HD, v, HD, 0.0f, dP, T);
            // softmax backward on the causal rows, folded with the score scale: dS = scale * P (dP - <P, dP>)
            for (int t = 0; t < T; ++t) {
                const float* p = P + size_t(t) * T;
                float* d = dP + size_t(t) * T;
                float dot = 0.0f;
                for (int j = 0; j <= t; ++j) dot += p[j] * d[j];
                for (int j = 0; j <= t; ++j) d[j] = scale * p[j] * (d[j] - dot);
                for (int j = t + 1; j < T; ++j) d[j] = 0.0f;
            }
            // dQ = dS K ; dK = dS^T Q
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, HD, T, 1.0f, dP, T, k, HD, 0.0f, dq, HD);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, HD, T, 1.0f, dP, T, q, HD, 0.0f, dk, HD);
            X* out = dx + size_t(b) * T * 3 * C + size_t(h) * HD;
            scatter_head(dq, T, HD, 3 * C, out);
            scatter_head(dk, T, HD, 3 * C, out + C);
            scatter_head(dv, T, HD, 3 * C, out + 2 * C);
        }
    });
}

}  // namespace us
