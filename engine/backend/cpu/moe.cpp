// The mixture-of-experts ops (backend.h): routing (softmax, top-K, renormalised gates) and its backward, the
// dispatch of token rows into the expert-ordered buffer and the weighted combine back, with their backwards. Every
// loop runs over tokens (or rows) and writes only its own outputs, so the results do not depend on the threads.
#include <algorithm>
#include <cmath>

#include "engine/backend/cpu/cpu_backend.h"

namespace us {

void CpuBackend::moe_route(Tensor probs, Tensor topk, Tensor gates, int N, int E, int K) {
    float* p = probs.f32();
    int32_t* idx = topk.i32();
    float* g = gates.f32();
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; ++n) {
        float* row = p + size_t(n) * E;
        float maxv = row[0];
        for (int e = 1; e < E; ++e) maxv = std::max(maxv, row[e]);
        float sum = 0.0f;
        for (int e = 0; e < E; ++e) sum += row[e] = std::exp(row[e] - maxv);
        const float inv = 1.0f / sum;
        for (int e = 0; e < E; ++e) row[e] *= inv;
        // K passes of the largest not yet taken; strict > keeps the lower expert on ties
        int32_t* chosen = idx + size_t(n) * K;
        float kept = 0.0f;
        for (int k = 0; k < K; ++k) {
            int best = -1;
            for (int e = 0; e < E; ++e) {
                bool taken = false;
                for (int j = 0; j < k; ++j) taken |= chosen[j] == e;
                if (!taken && (best < 0 || row[e] > row[best])) best = e;
            }
            chosen[k] = best;
            kept += row[best];
        }
        for (int k = 0; k < K; ++k) g[size_t(n) * K + k] = row[chosen[k]] / kept;
    }
}

void CpuBackend::moe_route_backward(Tensor dlogits, Tensor probs, Tensor topk, Tensor gates, Tensor dgates, Tensor aux,
                                    int N, int E, int K, int tokens_per_seq) {
    float* dl = dlogits.f32();
    const float* p = probs.f32();
    const int32_t* idx = topk.i32();
    const float* g = gates.f32();
    const float* dg = dgates.f32();
    const float* a = aux.empty() ? nullptr : aux.f32();
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; ++n) {
        const float* pr = p + size_t(n) * E;
        float* d = dl + size_t(n) * E;  // first dprobs, then dlogits
        if (a)
            std::copy_n(a + size_t(n / tokens_per_seq) * E, E, d);
        else
            std::fill_n(d, E, 0.0f);
        // gates g_k = p_{i_k} / S, S = sum of the chosen: dp_{i_m} += (dg_m - sum_k dg_k g_k) / S
        float kept = 0.0f, dot = 0.0f;
        for (int k = 0; k < K; ++k) {
            kept += pr[idx[size_t(n) * K + k]];
            dot += dg[size_t(n) * K + k] * g[size_t(n) * K + k];
        }
        for (int k = 0; k < K; ++k) d[idx[size_t(n) * K + k]] += (dg[size_t(n) * K + k] - dot) / kept;
        // softmax: dlogit_e = p_e (dp_e - sum_j p_j dp_j)
        float s = 0.0f;
        for (int e = 0; e < E; ++e) s += pr[e] * d[e];
        for (int e = 0; e < E; ++e) d[e] = pr[e] * (d[e] - s);
    }
}

void CpuBackend::moe_dispatch(Tensor out, Tensor x, Tensor rows, int N, int K, int C) {
    const int32_t* r = rows.i32();
    with_typed(x, [&](auto* src) {
        using X = std::remove_pointer_t<decltype(src)>;
        X* dst = static_cast<X*>(out.data);
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; ++n)
            for (int k = 0; k < K; ++k)
                if (const int row = r[size_t(n) * K + k]; row >= 0)
                    std::copy_n(src + size_t(n) * C, C, dst + size_t(row) * C);
    });
}

void CpuBackend::moe_dispatch_backward(Tensor dx, Tensor dout, Tensor rows, int N, int K, int C) {
    const int32_t* r = rows.i32();
    with_typed(dx, [&](auto* d) {
        using X = std::remove_pointer_t<decltype(d)>;
        const X* g = static_cast<const X*>(dout.data);
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; ++n)
            for (int k = 0; k < K; ++k)
                if (const int row = r[size_t(n) * K + k]; row >= 0)
                    for (int c = 0; c < C; ++c)
                        store(d + size_t(n) * C + c, load(d + size_t(n) * C + c) + load(g + size_t(row) * C + c));
    });
}

void CpuBackend::moe_combine(Tensor out, Tensor y, Tensor rows, Tensor gates, int N, int K, int C) {
    const int32_t* r = rows.i32();
    const float* g = gates.f32();
    with_typed(out, [&](auto* o) {
        using X = std::remove_pointer_t<decltype(o)>;
        const X* src = static_cast<const X*>(y.data);
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; ++n)
            for (int c = 0; c < C; ++c) {
                float acc = load(o + size_t(n) * C + c);
                for (int k = 0; k < K; ++k)
                    if (const int row = r[size_t(n) * K + k]; row >= 0)
                        acc += g[size_t(n) * K + k] * load(src + size_t(row) * C + c);
                store(o + size_t(n) * C + c, acc);
            }
    });
}

void CpuBackend::moe_combine_backward(Tensor dy, Tensor dgates, Tensor dout, Tensor y, Tensor rows, Tensor gates, int N,
                                      int K, int C) {
    const int32_t* r = rows.i32();
    const float* g = gates.f32();
    float* dg = dgates.f32();
    with_typed(dout, [&](auto* d) {
        using X = std::remove_pointer_t<decltype(d)>;
        const X* src = static_cast<const X*>(y.data);
        X* dst = static_cast<X*>(dy.data);
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; ++n)
            for (int k = 0; k < K; ++k) {
                const int row = r[size_t(n) * K + k];
                float dot = 0.0f;
                if (row >= 0)
                    for (int c = 0; c < C; ++c) {
                        const float dn = load(d + size_t(n) * C + c);
                        dot += dn * load(src + size_t(row) * C + c);
                        store(dst + size_t(row) * C + c, g[size_t(n) * K + k] * dn);
                    }
                dg[size_t(n) * K + k] = dot;
            }
    });
}

void CpuBackend::gather_rows(Tensor dst, Tensor src, Tensor index, int M, int C) {
    const int32_t* ix = index.i32();
    with_typed(src, [&](auto* s) {
        using X = std::remove_pointer_t<decltype(s)>;
        X* d = static_cast<X*>(dst.data);
#pragma omp parallel for schedule(static)
        for (int i = 0; i < M; ++i) std::copy_n(s + size_t(ix[i]) * C, C, d + size_t(i) * C);
    });
}

}  // namespace us
