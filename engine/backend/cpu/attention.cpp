// Causal multi-head attention, one (batch, head) pair per task: the products go through small_sgemm (AVX2 register
// tiles, or OpenBLAS single-threaded inside the parallel region), the softmax runs on the head's (T,T)
// probabilities. K^T and V^T are transposed once per head, so every product reads B along its columns. Scale
// 1/sqrt(HD). With `probs` empty the probabilities are not kept (selective recompute) and backward recomputes them
// from q and k. fp32 activations are read and written in place (strided: q, k, v are columns of qkv); bf16 ones go
// through fp32 tiles.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/fast_math.h"
#include "engine/backend/cpu/isa_clones.h"
#include "engine/backend/cpu/lane_reductions.h"
#include "engine/backend/cpu/small_sgemm.h"
#include "engine/backend/cpu/softmax_row.h"

namespace us {

namespace {

// Query rows per sgemm. Rows [r0, r1) attend to keys [0, r1) only, so the products taken by row blocks skip the
// masked keys after each block: at T = 256 they do 5/8 of the full square's multiply-adds.
constexpr int kRowBlock = 64;

// Per-thread tiles: P and dP (T,T); q, k, v, o/do, dq, dk, dv (T,HD); K^T and V^T (HD,T); small_sgemm's panel.
size_t tile_floats(int T, int HD) {
    return 2 * size_t(T) * T + 9 * size_t(T) * HD + cpu::small_sgemm_panel_floats(std::max(T, HD));
}

// A (rows, cols) fp32 matrix with leading dimension ld.
struct Strided {
    float* p;
    int ld;
    float* row(int r) const { return p + size_t(r) * ld; }
};

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

// A head's matrix of the activations: in place for fp32, else gathered into `tile` (when `gather`).
template <typename X>
Strided head_matrix(X* src, int T, int HD, int row_stride, float* tile, bool gather) {
    if constexpr (std::is_same_v<X, float>) {
        return {src, row_stride};
    } else {
        if (gather) gather_head(src, T, HD, size_t(row_stride), tile);
        return {tile, HD};
    }
}

// One causal row in place: the first n scores become probabilities, the rest of the T zeros.
US_CPU_CLONES void softmax_causal_row(float* row, int n, int T) {
    cpu::softmax_in_place(row, n);
    for (int j = n; j < T; ++j) row[j] = 0.0f;
}

// P = causal_softmax(scale * Q K^T), rows t attend to positions <= t; the masked upper triangle is zero. kt is K^T
// (HD,T).
void causal_probs(Strided q, const float* kt, int T, int HD, float scale, float* P, float* panel) {
    for (int r0 = 0; r0 < T; r0 += kRowBlock) {
        const int r1 = std::min(T, r0 + kRowBlock);
        cpu::small_sgemm(false, r1 - r0, r1, HD, scale, q.row(r0), q.ld, kt, T, 0.0f, P + size_t(r0) * T, T, panel,
                         {cpu::CausalSkip::wanted_columns_upto, r0});  // the softmax reads scores [0, t] of row t
        for (int t = r0; t < r1; ++t) softmax_causal_row(P + size_t(t) * T, t + 1, T);
    }
}

// Softmax backward on a causal row, folded with the score scale: d = scale * p (d - <p, d>) over the n visible
// entries, zeros up to `width`.
US_CPU_CLONES void softmax_backward_row(const float* p, float* d, int n, int width, float scale) {
    const float dot = cpu::dot_lanes(p, d, n);
#pragma omp simd
    for (int j = 0; j < n; ++j) d[j] = scale * p[j] * (d[j] - dot);
    for (int j = n; j < width; ++j) d[j] = 0.0f;
}

// O = P V, each row block over the keys it sees.
void causal_pv(const float* P, Strided v, int T, int HD, Strided o, float* panel) {
    for (int r0 = 0; r0 < T; r0 += kRowBlock) {
        const int r1 = std::min(T, r0 + kRowBlock);
        cpu::small_sgemm(false, r1 - r0, HD, r1, 1.0f, P + size_t(r0) * T, T, v.p, v.ld, 0.0f, o.row(r0), o.ld, panel,
                         {cpu::CausalSkip::a_zero_after, r0});
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
        constexpr bool f32 = std::is_same_v<X, float>;
        X* y = static_cast<X*>(out.data);
        X* saved = probs.empty() ? nullptr : static_cast<X*>(probs.data);
#pragma omp parallel for schedule(dynamic, 1) num_threads(m_threads)
        for (int bh = 0; bh < B * NH; ++bh) {
            const int b = bh / NH, h = bh % NH;
            float* tile = tiles + per_thread * size_t(omp_get_thread_num());
            float* q_tile = tile + 2 * size_t(T) * T;
            float* k_tile = q_tile + size_t(T) * HD;
            float* v_tile = k_tile + size_t(T) * HD;
            float* o_tile = v_tile + size_t(T) * HD;
            float* kt = o_tile + size_t(T) * HD;
            float* panel = kt + size_t(T) * HD;
            X* base = x + size_t(b) * T * 3 * C + size_t(h) * HD;
            X* y_head = y + size_t(b) * T * C + size_t(h) * HD;
            const Strided q = head_matrix(base, T, HD, 3 * C, q_tile, true);
            const Strided k = head_matrix(base + C, T, HD, 3 * C, k_tile, true);
            const Strided v = head_matrix(base + 2 * C, T, HD, 3 * C, v_tile, true);
            const Strided o = head_matrix(y_head, T, HD, C, o_tile, false);
            float* P = tile;
            if constexpr (f32)
                if (saved) P = saved + size_t(bh) * T * T;  // fp32 probabilities are computed where they are kept
            cpu::transpose_into(k.p, T, HD, k.ld, kt);
            causal_probs(q, kt, T, HD, scale, P, panel);
            causal_pv(P, v, T, HD, o, panel);
            if constexpr (!f32) {
                scatter_head(o.p, T, HD, C, y_head);
                if (saved)
                    for (size_t i = 0; i < size_t(T) * T; ++i) store(saved + size_t(bh) * T * T + i, P[i]);
            }
        }
    });
}

void CpuBackend::attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor probs, int B, int T, int NH, int HD) {
    const int C = NH * HD;
    const float scale = 1.0f / std::sqrt(float(HD));
    const size_t per_thread = tile_floats(T, HD);
    float* tiles = scratch(per_thread * size_t(m_threads));
    with_typed(qkv, [&](auto* x) {
        using X = std::remove_pointer_t<decltype(x)>;
        constexpr bool f32 = std::is_same_v<X, float>;
        X* dx = static_cast<X*>(dqkv.data);
        X* dy = static_cast<X*>(dout.data);
        const X* saved = probs.empty() ? nullptr : static_cast<const X*>(probs.data);
#pragma omp parallel for schedule(dynamic, 1) num_threads(m_threads)
        for (int bh = 0; bh < B * NH; ++bh) {
            const int b = bh / NH, h = bh % NH;
            float* P_tile = tiles + per_thread * size_t(omp_get_thread_num());
            float* dP = P_tile + size_t(T) * T;
            float* q_tile = dP + size_t(T) * T;
            float* k_tile = q_tile + size_t(T) * HD;
            float* v_tile = k_tile + size_t(T) * HD;
            float* do_tile = v_tile + size_t(T) * HD;
            float* dq_tile = do_tile + size_t(T) * HD;
            float* dk_tile = dq_tile + size_t(T) * HD;
            float* dv_tile = dk_tile + size_t(T) * HD;
            float* kt = dv_tile + size_t(T) * HD;
            float* vt = kt + size_t(T) * HD;
            float* panel = vt + size_t(T) * HD;
            X* base = x + size_t(b) * T * 3 * C + size_t(h) * HD;
            X* dbase = dx + size_t(b) * T * 3 * C + size_t(h) * HD;
            const Strided q = head_matrix(base, T, HD, 3 * C, q_tile, true);
            const Strided k = head_matrix(base + C, T, HD, 3 * C, k_tile, true);
            const Strided v = head_matrix(base + 2 * C, T, HD, 3 * C, v_tile, true);
            const Strided dO = head_matrix(dy + size_t(b) * T * C + size_t(h) * HD, T, HD, C, do_tile, true);
            const Strided dq = head_matrix(dbase, T, HD, 3 * C, dq_tile, false);
            const Strided dk = head_matrix(dbase + C, T, HD, 3 * C, dk_tile, false);
            const Strided dv = head_matrix(dbase + 2 * C, T, HD, 3 * C, dv_tile, false);
            const float* P = P_tile;
            cpu::transpose_into(v.p, T, HD, v.ld, vt);
            if (!saved) {
                cpu::transpose_into(k.p, T, HD, k.ld, kt);
                causal_probs(q, kt, T, HD, scale, P_tile, panel);
            } else if constexpr (f32) {
                P = saved + size_t(bh) * T * T;
            } else {
                for (size_t i = 0; i < size_t(T) * T; ++i) P_tile[i] = load(saved + size_t(bh) * T * T + i);
            }
            // By row blocks, last first: the last block sees every key, so it writes dK and dV (beta 0) and the
            // earlier ones add to their first r1 rows.
            for (int r0 = (T - 1) / kRowBlock * kRowBlock; r0 >= 0; r0 -= kRowBlock) {
                const int r1 = std::min(T, r0 + kRowBlock), rows = r1 - r0;
                const float beta = r1 == T ? 0.0f : 1.0f;
                const float* Pb = P + size_t(r0) * T;
                float* dS = dP + size_t(r0) * T;
                // dV[0:r1] += P[r0:r1, 0:r1]^T dO[r0:r1] ; dP[r0:r1, 0:r1] = dO[r0:r1] V[0:r1]^T
                // (P and dS are zero above the diagonal: key j is seen by rows r0 + i >= j)
                const cpu::CausalSkip keys_seen{cpu::CausalSkip::a_zero_before, r0};
                const cpu::CausalSkip rows_see{cpu::CausalSkip::a_zero_after, r0};
                cpu::small_sgemm(true, r1, HD, rows, 1.0f, Pb, T, dO.row(r0), dO.ld, beta, dv.p, dv.ld, panel,
                                 keys_seen);
                cpu::small_sgemm(false, rows, r1, HD, 1.0f, dO.row(r0), dO.ld, vt, T, 0.0f, dS, T, panel,
                                 {cpu::CausalSkip::wanted_columns_upto, r0});
                // softmax backward on the causal rows, folded with the score scale: dS = scale * P (dP - <P, dP>)
                for (int t = r0; t < r1; ++t)
                    softmax_backward_row(P + size_t(t) * T, dP + size_t(t) * T, t + 1, r1, scale);
                // dQ[r0:r1] = dS K[0:r1] ; dK[0:r1] += dS^T Q[r0:r1]
                cpu::small_sgemm(false, rows, HD, r1, 1.0f, dS, T, k.p, k.ld, 0.0f, dq.row(r0), dq.ld, panel, rows_see);
                cpu::small_sgemm(true, r1, HD, rows, 1.0f, dS, T, q.row(r0), q.ld, beta, dk.p, dk.ld, panel, keys_seen);
            }
            if constexpr (!f32) {
                scatter_head(dq.p, T, HD, 3 * C, dbase);
                scatter_head(dk.p, T, HD, 3 * C, dbase + C);
                scatter_head(dv.p, T, HD, 3 * C, dbase + 2 * C);
            }
        }
    });
}

}  // namespace us
