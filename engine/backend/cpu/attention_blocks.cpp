// Blockwise attention with an online softmax (backend.h, AttentionBlockArgs): what ring attention computes on each
// key/value block that reaches a rank. One (batch, head) per OpenMP task, its chunk pairs in order (so the running
// max, sum and output of a query row are only ever touched by one thread); each pair's q, k, v (and dO) gathered
// into fp32 tiles, the products through sgemm, the merge in fp32.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/backend/cpu/cpu_backend.h"

namespace us {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

template <typename X>
void gather(const X* src, int rows, int HD, size_t row_stride, float* dst) {
    for (int t = 0; t < rows; ++t)
        for (int i = 0; i < HD; ++i) dst[size_t(t) * HD + i] = load(src + t * row_stride + i);
}

// Visible keys of query row i in a pair: all c of them, or i + 1 on the causal diagonal.
inline int visible(const AttentionChunkPair& p, int i, int c) { return p.causal ? i + 1 : c; }

}  // namespace

void CpuBackend::attention_block_forward(const AttentionBlockArgs& a, Tensor acc, Tensor row_max, Tensor row_sum) {
    const int C = a.NH * a.HD, c = a.chunk, HD = a.HD, T = a.T;
    const float scale = 1.0f / std::sqrt(float(HD));
    const size_t per_thread = size_t(c) * c + 3 * size_t(c) * HD;
    float* tiles = scratch(per_thread * size_t(m_threads));
    float* out = acc.f32();
    float* mx = row_max.f32();
    float* sm = row_sum.f32();
    with_typed(a.qkv, [&](auto* x) {
        using X = std::remove_pointer_t<decltype(x)>;
        const X* kvp = static_cast<const X*>(a.kv.data);
        const size_t kvs = size_t(a.kv_row_stride());
#pragma omp parallel for schedule(dynamic, 1) num_threads(m_threads)
        for (int bh = 0; bh < a.B * a.NH; ++bh) {
            const int b = bh / a.NH, h = bh % a.NH;
            float* S = tiles + per_thread * size_t(omp_get_thread_num());
            float* q = S + size_t(c) * c;
            float* k = q + size_t(c) * HD;
            float* v = k + size_t(c) * HD;
            for (int pi = 0; pi < a.pair_count; ++pi) {
                const AttentionChunkPair& p = a.pairs[pi];
                const int q0 = p.q_chunk * c, k0 = p.k_chunk * c;
                gather(x + (size_t(b) * T + q0) * 3 * C + size_t(h) * HD, c, HD, 3 * size_t(C), q);
                gather(kvp + (size_t(b) * T + k0) * kvs + size_t(h) * HD, c, HD, kvs, k);
                gather(kvp + (size_t(b) * T + k0) * kvs + C + size_t(h) * HD, c, HD, kvs, v);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c, c, HD, scale, q, HD, k, HD, 0.0f, S, c);
                float* o = out + (size_t(b) * T + q0) * C + size_t(h) * HD;
                for (int i = 0; i < c; ++i) {
                    float* row = S + size_t(i) * c;
                    const int n = visible(p, i, c);
                    const size_t at = (size_t(b) * a.NH + h) * T + q0 + i;
                    float block_max = kNegInf;
                    for (int j = 0; j < n; ++j) block_max = std::max(block_max, row[j]);
                    const float m_old = sm[at] > 0.0f ? mx[at] : kNegInf;  // a zero sum: nothing merged yet
                    const float m_new = std::max(m_old, block_max);
                    if (m_new == kNegInf) {  // no key visible yet: nothing to merge
                        std::fill(row, row + c, 0.0f);
                        continue;
                    }
                    const float alpha = std::exp(m_old - m_new);  // 0 for the first block
                    float sum = 0.0f;
                    for (int j = 0; j < n; ++j) sum += row[j] = std::exp(row[j] - m_new);
                    std::fill(row + n, row + c, 0.0f);
                    sm[at] = sm[at] * alpha + sum;
                    mx[at] = m_new;
                    float* orow = o + size_t(i) * C;
                    for (int d = 0; d < HD; ++d) orow[d] *= alpha;
                }
                // acc rows += P V
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c, HD, c, 1.0f, S, c, v, HD, 1.0f, o, C);
            }
        }
    });
}

void CpuBackend::attention_block_finish(Tensor out, Tensor lse, Tensor acc, Tensor row_max, Tensor row_sum, int B,
                                        int T, int NH, int HD) {
    const int C = NH * HD;
    const float* o = acc.f32();
    const float* mx = row_max.f32();
    const float* sm = row_sum.f32();
    float* l = lse.f32();
    with_typed(out, [&](auto* y) {
#pragma omp parallel for schedule(static)
        for (int bt = 0; bt < B * T; ++bt) {
            const int b = bt / T, t = bt % T;
            for (int h = 0; h < NH; ++h) {
                const size_t at = (size_t(b) * NH + h) * T + t;
                const float inv = 1.0f / sm[at];
                for (int d = 0; d < HD; ++d)
                    store(y + size_t(bt) * C + h * HD + d, o[size_t(bt) * C + h * HD + d] * inv);
                l[at] = mx[at] + std::log(sm[at]);
            }
        }
    });
}

void CpuBackend::attention_block_delta(Tensor delta, Tensor dout, Tensor out, int B, int T, int NH, int HD) {
    const int C = NH * HD;
    float* dl = delta.f32();
    with_typed(out, [&](auto* y) {
        using X = std::remove_pointer_t<decltype(y)>;
        const X* dy = static_cast<const X*>(dout.data);
#pragma omp parallel for schedule(static)
        for (int bt = 0; bt < B * T; ++bt) {
            const int b = bt / T, t = bt % T;
            for (int h = 0; h < NH; ++h) {
                float s = 0.0f;
                for (int d = 0; d < HD; ++d) s += load(dy + size_t(bt) * C + h * HD + d) * load(y + size_t(bt) * C + h * HD + d);
                dl[(size_t(b) * NH + h) * T + t] = s;
            }
        }
    });
}

void CpuBackend::attention_block_backward(const AttentionBlockArgs& a, Tensor dq, Tensor dkv, Tensor dout, Tensor lse,
                                          Tensor delta) {
    const int C = a.NH * a.HD, c = a.chunk, HD = a.HD, T = a.T;
    const float scale = 1.0f / std::sqrt(float(HD));
    const size_t per_thread = 2 * size_t(c) * c + 4 * size_t(c) * HD;
    float* tiles = scratch(per_thread * size_t(m_threads));
    float* gq = dq.f32();
    float* gkv = dkv.f32();
    const float* l = lse.f32();
    const float* dl = delta.f32();
    with_typed(a.qkv, [&](auto* x) {
        using X = std::remove_pointer_t<decltype(x)>;
        const X* kvp = static_cast<const X*>(a.kv.data);
        const size_t kvs = size_t(a.kv_row_stride());
        const X* dy = static_cast<const X*>(dout.data);
#pragma omp parallel for schedule(dynamic, 1) num_threads(m_threads)
        for (int bh = 0; bh < a.B * a.NH; ++bh) {
            const int b = bh / a.NH, h = bh % a.NH;
            float* P = tiles + per_thread * size_t(omp_get_thread_num());
            float* dP = P + size_t(c) * c;
            float* q = dP + size_t(c) * c;
            float* k = q + size_t(c) * HD;
            float* v = k + size_t(c) * HD;
            float* dO = v + size_t(c) * HD;
            for (int pi = 0; pi < a.pair_count; ++pi) {
                const AttentionChunkPair& p = a.pairs[pi];
                const int q0 = p.q_chunk * c, k0 = p.k_chunk * c;
                gather(x + (size_t(b) * T + q0) * 3 * C + size_t(h) * HD, c, HD, 3 * size_t(C), q);
                gather(kvp + (size_t(b) * T + k0) * kvs + size_t(h) * HD, c, HD, kvs, k);
                gather(kvp + (size_t(b) * T + k0) * kvs + C + size_t(h) * HD, c, HD, kvs, v);
                gather(dy + (size_t(b) * T + q0) * C + size_t(h) * HD, c, HD, size_t(C), dO);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c, c, HD, scale, q, HD, k, HD, 0.0f, P, c);
                const size_t at0 = (size_t(b) * a.NH + h) * T + q0;
                for (int i = 0; i < c; ++i) {  // P = exp(S - lse): the final probabilities of this block's keys
                    float* row = P + size_t(i) * c;
                    const int n = visible(p, i, c);
                    for (int j = 0; j < n; ++j) row[j] = std::exp(row[j] - l[at0 + i]);
                    std::fill(row + n, row + c, 0.0f);
                }
                float* gk = gkv + (size_t(b) * T + k0) * 2 * C + size_t(h) * HD;
                // dV += P^T dO ; dP = dO V^T
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c, HD, c, 1.0f, P, c, dO, HD, 1.0f, gk + C, 2 * C);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c, c, HD, 1.0f, dO, HD, v, HD, 0.0f, dP, c);
                // dS = scale * P (dP - delta), zero where masked (P is)
                for (int i = 0; i < c; ++i) {
                    const float* pr = P + size_t(i) * c;
                    float* d = dP + size_t(i) * c;
                    const float di = dl[at0 + i];
                    for (int j = 0; j < c; ++j) d[j] = scale * pr[j] * (d[j] - di);
                }
                // dQ += dS K ; dK += dS^T Q
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c, HD, c, 1.0f, dP, c, k, HD, 1.0f,
                            gq + (size_t(b) * T + q0) * C + size_t(h) * HD, C);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c, HD, c, 1.0f, dP, c, q, HD, 1.0f, gk, 2 * C);
            }
        }
    });
}

void CpuBackend::attention_block_pack_kv(Tensor kv, Tensor qkv, int B, int T, int C) {
    with_typed(qkv, [&](auto* x) {
        using X = std::remove_pointer_t<decltype(x)>;
        X* dst = static_cast<X*>(kv.data);
#pragma omp parallel for schedule(static)
        for (int bt = 0; bt < B * T; ++bt) std::copy_n(x + size_t(bt) * 3 * C + C, 2 * C, dst + size_t(bt) * 2 * C);
    });
}

void CpuBackend::attention_block_store_grads(Tensor dqkv, Tensor dq, Tensor dkv, int B, int T, int C) {
    const float* q = dq.f32();
    const float* kv = dkv.f32();
    with_typed(dqkv, [&](auto* x) {
#pragma omp parallel for schedule(static)
        for (int bt = 0; bt < B * T; ++bt) {
            for (int i = 0; i < C; ++i) store(x + size_t(bt) * 3 * C + i, q[size_t(bt) * C + i]);
            for (int i = 0; i < 2 * C; ++i) store(x + size_t(bt) * 3 * C + C + i, kv[size_t(bt) * 2 * C + i]);
        }
    });
}

}  // namespace us
