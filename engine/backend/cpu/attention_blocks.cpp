// Blockwise attention with an online softmax (backend.h, AttentionBlockArgs): what ring attention computes on each
// key/value block that reaches a rank, and what one rank's `--attention flash` computes with one chunk per sequence.
// One (batch, head) per OpenMP task, its chunk pairs in order (so the running max, sum and output of a query row are
// only ever touched by one thread). Inside a pair the queries go in blocks of 64 rows, each against the keys it can
// see: on a causal (diagonal) pair that is the keys up to the block's last row, so the masked half is skipped as
// the naive kernel skips it. The scores of one block are a (64, keys) fp32 temporary per thread, never the (c, c)
// square and never stored: backward recomputes them by blocks of 128 keys from q, k and the log-sum-exp. fp32 q, k, v
// and dO are read in place (strided); bf16 ones are gathered into fp32 tiles once per pair. The products go through
// small_sgemm; K^T (forward), Q^T and dO^T (backward) are transposed once per pair for them.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/fast_math.h"
#include "engine/backend/cpu/isa_clones.h"
#include "engine/backend/cpu/lane_reductions.h"
#include "engine/backend/cpu/small_sgemm.h"

namespace us {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Query rows per block: a block's scores against 1,024 keys are 256 KiB, which stays in a core's L2.
constexpr int kRowBlock = 64;
// Keys per block in backward: 128 gives dQ's product an inner dimension of 128 (bench_attention, 2 threads: flash
// backward 99-115 GFLOP/s against 93-107 with 64); the masked corner it computes on the diagonal is 1% at T = 1024.
constexpr int kKeyBlock = 128;

// One head's rows of an activation: fp32 in place (ld = the activation's row stride), else converted into `tile`.
struct HeadRows {
    const float* p;
    int ld;
    const float* row(int r) const { return p + size_t(r) * ld; }
};

template <typename X>
HeadRows head_rows(const X* src, int rows, int HD, size_t row_stride, float* tile) {
    if constexpr (std::is_same_v<X, float>) {
        return {src, int(row_stride)};
    } else {
        for (int t = 0; t < rows; ++t)
            for (int i = 0; i < HD; ++i) tile[size_t(t) * HD + i] = load(src + t * row_stride + i);
        return {tile, HD};
    }
}

// Keys [0, n) that query rows [r0, r0 + rows) of a pair see between them: every key of the chunk, or on the causal
// diagonal those up to the block's last row. Row i itself sees `visible` of them.
inline int block_keys(const AttentionChunkPair& p, int r0, int rows, int c) { return p.causal ? r0 + rows : c; }
inline int visible(const AttentionChunkPair& p, int i, int c) { return p.causal ? i + 1 : c; }

// The transpose, for backward by key blocks: the first query row that sees key j0 (on the diagonal, row j0), and
// how many of rows [i0, ...) do not see key j.
inline int first_query(const AttentionChunkPair& p, int j0) { return p.causal ? j0 : 0; }
inline int masked_queries(const AttentionChunkPair& p, int j, int i0) { return p.causal ? j - i0 : 0; }

// fp32 tiles per thread for the gathered (bf16) q, k, v and dO of a pair; none when they are read in place.
size_t gathered_floats(DType dtype, int matrices, int c, int HD) {
    return dtype == DType::f32 ? 0 : size_t(matrices) * c * HD;
}

// One query row's step of the online softmax over a block's keys: the first `seen` of the row's n scores become
// exp(score - new max), the rest zeros; the row's running max and sum are updated. Returns the factor that the row's
// accumulated output must be scaled by (0 for the first block).
US_CPU_CLONES float online_softmax_row(float* row, int seen, int n, float& row_max, float& row_sum) {
    const float m_old = row_sum > 0.0f ? row_max : kNegInf;  // a zero sum: nothing merged yet
    const float m_new = std::max(m_old, cpu::max_lanes(row, seen));
    const float alpha = std::exp(m_old - m_new);
#pragma omp simd
    for (int j = 0; j < seen; ++j) row[j] = cpu::exp_nonpositive(row[j] - m_new);
    std::fill(row + seen, row + n, 0.0f);
    row_sum = row_sum * alpha + cpu::sum_lanes(row, seen);
    row_max = m_new;
    return alpha;
}

// A row of P^T in backward: entries [0, hidden) masked (zero), the rest exp(score - lse of its query row).
US_CPU_CLONES void probabilities_row(float* row, int hidden, int m, const float* lse) {
    std::fill(row, row + hidden, 0.0f);
#pragma omp simd
    for (int i = hidden; i < m; ++i) row[i] = cpu::exp_nonpositive(row[i] - lse[i]);
}

}  // namespace

void CpuBackend::attention_block_forward(const AttentionBlockArgs& a, Tensor acc, Tensor row_max, Tensor row_sum) {
    const int C = a.NH * a.HD, c = a.chunk, HD = a.HD, T = a.T;
    const float scale = 1.0f / std::sqrt(float(HD));
    const size_t per_thread = size_t(kRowBlock) * c + gathered_floats(a.qkv.dtype, 3, c, HD) + size_t(HD) * c +
                              cpu::small_sgemm_panel_floats(std::max(c, HD));
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
            float* q_tile = S + size_t(kRowBlock) * c;
            float* k_tile = q_tile + size_t(c) * HD;
            float* v_tile = k_tile + size_t(c) * HD;
            float* kt = S + size_t(kRowBlock) * c + gathered_floats(a.qkv.dtype, 3, c, HD);
            float* panel = kt + size_t(HD) * c;
            for (int pi = 0; pi < a.pair_count; ++pi) {
                const AttentionChunkPair& p = a.pairs[pi];
                const int q0 = p.q_chunk * c, k0 = p.k_chunk * c;
                const X* kv_rows = kvp + (size_t(b) * T + k0) * kvs + size_t(h) * HD;
                const HeadRows q =
                    head_rows(x + (size_t(b) * T + q0) * 3 * C + size_t(h) * HD, c, HD, 3 * size_t(C), q_tile);
                const HeadRows k = head_rows(kv_rows, c, HD, kvs, k_tile);
                const HeadRows v = head_rows(kv_rows + C, c, HD, kvs, v_tile);
                float* o = out + (size_t(b) * T + q0) * C + size_t(h) * HD;
                const size_t at0 = (size_t(b) * a.NH + h) * T + q0;
                cpu::transpose_into(k.p, c, HD, k.ld, kt);
                for (int r0 = 0; r0 < c; r0 += kRowBlock) {
                    const int rows = std::min(kRowBlock, c - r0), n = block_keys(p, r0, rows, c);
                    // on the diagonal, row i's softmax reads its scores [0, r0 + i] and the later ones are zeros
                    using Skip = cpu::CausalSkip;
                    const Skip seen = Skip::if_causal(p.causal, Skip::wanted_columns_upto, r0);
                    const Skip zero_after = Skip::if_causal(p.causal, Skip::a_zero_after, r0);
                    cpu::small_sgemm(false, rows, n, HD, scale, q.row(r0), q.ld, kt, c, 0.0f, S, n, panel, seen);
                    for (int i = 0; i < rows; ++i) {
                        const size_t at = at0 + size_t(r0 + i);
                        const float alpha =
                            online_softmax_row(S + size_t(i) * n, visible(p, r0 + i, c), n, mx[at], sm[at]);
                        float* orow = o + size_t(r0 + i) * C;
#pragma omp simd
                        for (int d = 0; d < HD; ++d) orow[d] *= alpha;
                    }
                    // acc rows += P V over the block's keys
                    cpu::small_sgemm(false, rows, HD, n, 1.0f, S, n, v.p, v.ld, 1.0f, o + size_t(r0) * C, C, panel,
                                     zero_after);
                }
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
                for (int d = 0; d < HD; ++d)
                    s += load(dy + size_t(bt) * C + h * HD + d) * load(y + size_t(bt) * C + h * HD + d);
                dl[(size_t(b) * NH + h) * T + t] = s;
            }
        }
    });
}

void CpuBackend::attention_block_backward(const AttentionBlockArgs& a, Tensor dq, Tensor dkv, Tensor dout, Tensor lse,
                                          Tensor delta) {
    const int C = a.NH * a.HD, c = a.chunk, HD = a.HD, T = a.T;
    const float scale = 1.0f / std::sqrt(float(HD));
    const size_t per_thread = 2 * size_t(kKeyBlock) * c + gathered_floats(a.qkv.dtype, 4, c, HD) + 2 * size_t(HD) * c +
                              cpu::small_sgemm_panel_floats(std::max({c, HD, kKeyBlock}));
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
            float* dS = P + size_t(kKeyBlock) * c;
            float* q_tile = dS + size_t(kKeyBlock) * c;
            float* k_tile = q_tile + size_t(c) * HD;
            float* v_tile = k_tile + size_t(c) * HD;
            float* do_tile = v_tile + size_t(c) * HD;
            float* qt = dS + size_t(kKeyBlock) * c + gathered_floats(a.qkv.dtype, 4, c, HD);
            float* dot = qt + size_t(HD) * c;
            float* panel = dot + size_t(HD) * c;
            for (int pi = 0; pi < a.pair_count; ++pi) {
                const AttentionChunkPair& p = a.pairs[pi];
                const int q0 = p.q_chunk * c, k0 = p.k_chunk * c;
                const X* kv_rows = kvp + (size_t(b) * T + k0) * kvs + size_t(h) * HD;
                const HeadRows q =
                    head_rows(x + (size_t(b) * T + q0) * 3 * C + size_t(h) * HD, c, HD, 3 * size_t(C), q_tile);
                const HeadRows k = head_rows(kv_rows, c, HD, kvs, k_tile);
                const HeadRows v = head_rows(kv_rows + C, c, HD, kvs, v_tile);
                const HeadRows dO =
                    head_rows(dy + (size_t(b) * T + q0) * C + size_t(h) * HD, c, HD, size_t(C), do_tile);
                float* gk = gkv + (size_t(b) * T + k0) * 2 * C + size_t(h) * HD;
                float* gqb = gq + (size_t(b) * T + q0) * C + size_t(h) * HD;
                const size_t at0 = (size_t(b) * a.NH + h) * T + q0;
                cpu::transpose_into(q.p, c, HD, q.ld, qt);
                cpu::transpose_into(dO.p, c, HD, dO.ld, dot);
                // By blocks of 128 keys, each against the queries that see it: on a causal pair the rows from the
                // block's first key on. The key block's dK and dV then sum over all those rows in one product each
                // (a long inner dimension); only dQ takes a product with an inner dimension of 128.
                for (int j0 = 0; j0 < c; j0 += kKeyBlock) {
                    const int keys = std::min(kKeyBlock, c - j0), i0 = first_query(p, j0), m = c - i0;
                    // On the diagonal (i0 = j0) key j is seen by query rows i >= j only: P^T and dS^T are zero
                    // left of that, and only those columns are wanted.
                    using Skip = cpu::CausalSkip;
                    const Skip wanted = Skip::if_causal(p.causal, Skip::wanted_columns_from, 0);
                    const Skip zero_before = Skip::if_causal(p.causal, Skip::a_zero_before, 0);
                    const Skip zero_after = Skip::if_causal(p.causal, Skip::a_zero_after, 0);
                    // P^T = exp(S^T - lse): the final probabilities of these keys for rows [i0, c)
                    cpu::small_sgemm(false, keys, m, HD, scale, k.row(j0), k.ld, qt + i0, c, 0.0f, P, m, panel, wanted);
                    const float* li = l + at0 + i0;
                    for (int j = 0; j < keys; ++j)  // rows before key j0 + j on the diagonal do not see it
                        probabilities_row(P + size_t(j) * m, masked_queries(p, j0 + j, i0), m, li);
                    // dV[keys] += P^T dO[i0:c] ; dP^T = V[keys] dO[i0:c]^T
                    cpu::small_sgemm(false, keys, HD, m, 1.0f, P, m, dO.row(i0), dO.ld, 1.0f,
                                     gk + size_t(j0) * 2 * C + C, 2 * C, panel, zero_before);
                    cpu::small_sgemm(false, keys, m, HD, 1.0f, v.row(j0), v.ld, dot + i0, c, 0.0f, dS, m, panel,
                                     wanted);
                    // dS^T = scale * P^T (dP^T - delta), zero where masked (P is)
                    const float* di = dl + at0 + i0;
                    for (int j = 0; j < keys; ++j) {
                        const int hidden = masked_queries(p, j0 + j, i0);  // dP^T there is unwanted: not read
                        const float* pr = P + size_t(j) * m;
                        float* d = dS + size_t(j) * m;
                        std::fill(d, d + hidden, 0.0f);
#pragma omp simd
                        for (int i = hidden; i < m; ++i) d[i] = scale * pr[i] * (d[i] - di[i]);
                    }
                    // dK[keys] += dS^T Q[i0:c] ; dQ[i0:c] += dS K[keys]
                    cpu::small_sgemm(false, keys, HD, m, 1.0f, dS, m, q.row(i0), q.ld, 1.0f, gk + size_t(j0) * 2 * C,
                                     2 * C, panel, zero_before);
                    cpu::small_sgemm(true, m, HD, keys, 1.0f, dS, m, k.row(j0), k.ld, 1.0f, gqb + size_t(i0) * C, C,
                                     panel, zero_after);
                }
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
