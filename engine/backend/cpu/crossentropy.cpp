// Softmax cross-entropy over fp32 logits, fused in place: forward turns logits into probabilities and writes each
// token's loss; backward turns the probabilities into dlogits = (probs - onehot) * dloss. The vocabulary-parallel
// form splits the forward into three steps around the tensor-parallel group's reductions (backend.h); bf16 runs take
// the fused form (bf16 logits in, bf16 probs - onehot out, the loss on the way). A row's max,
// exp and sum are vectorised: the branch-free exp (fast_math.h), the sums in fixed-order lanes (lane_reductions.h).
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/fast_math.h"
#include "engine/backend/cpu/isa_clones.h"
#include "engine/backend/cpu/lane_reductions.h"
#include "engine/backend/cpu/softmax_row.h"

namespace us {

namespace {

// A row of logits in place into probabilities.
US_CPU_CLONES void softmax_row(float* row, int V) { cpu::softmax_in_place(row, V); }

US_CPU_CLONES float row_max(const float* row, int n) { return cpu::max_lanes(row, n); }

US_CPU_CLONES float sum_exp(const float* row, int n, float shift) {
    return cpu::sum_lanes(n, [row, shift](int i) { return cpu::exp_nonpositive(row[i] - shift); });
}

US_CPU_CLONES void exp_scaled_row(float* row, int n, float shift, float factor) {
#pragma omp simd
    for (int i = 0; i < n; ++i) row[i] = cpu::exp_nonpositive(row[i] - shift) * factor;
}

US_CPU_CLONES void widen_row(float* dst, const bf16* src, int n) {
#pragma omp simd
    for (int i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

US_CPU_CLONES void narrow_row(bf16* dst, const float* src, int n) {
    for (int i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

}  // namespace

void CpuBackend::crossentropy_forward(Tensor losses, Tensor logits, Tensor targets, int N, int V) {
    float* loss = losses.f32();
    float* z = logits.f32();
    const int32_t* tgt = targets.i32();
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; ++n) {
        float* row = z + size_t(n) * V;
        softmax_row(row, V);
        loss[n] = -std::log(std::max(row[tgt[n]], 1e-30f));
    }
}

void CpuBackend::crossentropy_backward(Tensor dlogits, Tensor probs, Tensor targets, float dloss, int N, int V,
                                       int vocab_begin) {
    const float* p = probs.f32();
    const int32_t* tgt = targets.i32();
    const bool to_bf16 = dlogits.dtype == DType::bf16;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; ++n) {
        const float* row = p + size_t(n) * V;
        const int t = tgt[n] - vocab_begin;
        auto grad = [&](int i) { return i == t ? row[i] * dloss - dloss : row[i] * dloss; };
        if (to_bf16) {
            bf16* out = dlogits.b16() + size_t(n) * V;
            for (int i = 0; i < V; ++i) out[i] = f32_to_bf16(grad(i));
        } else {
            float* out = dlogits.f32() + size_t(n) * V;
            for (int i = 0; i < V; ++i) out[i] = grad(i);
        }
    }
}

void CpuBackend::crossentropy_fused(Tensor losses, Tensor logits, Tensor targets, int N, int V) {
    float* loss = losses.f32();
    bf16* z = logits.b16();
    const int32_t* tgt = targets.i32();
#pragma omp parallel
    {
        // A row in fp32 while its softmax is taken: one buffer per thread, grown once per run, not per row.
        thread_local std::vector<float> row;
        if (row.size() < size_t(V)) row.resize(size_t(V));
#pragma omp for schedule(static)
        for (int n = 0; n < N; ++n) {
            bf16* logit = z + size_t(n) * V;
            widen_row(row.data(), logit, V);
            softmax_row(row.data(), V);
            const int t = tgt[n];
            loss[n] = -std::log(std::max(row[size_t(t)], 1e-30f));
            row[size_t(t)] -= 1.0f;
            narrow_row(logit, row.data(), V);
        }
    }
}

void CpuBackend::crossentropy_local_max(Tensor rowmax, Tensor logits, int N, int V, int valid) {
    float* out = rowmax.f32();
    const float* z = logits.f32();
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; ++n) {
        const float* row = z + size_t(n) * V;
        // a rank holding only padding contributes nothing to the maximum
        out[n] = valid > 0 ? row_max(row, valid) : -INFINITY;
    }
}

void CpuBackend::crossentropy_local_sums(Tensor sums, Tensor logits, Tensor rowmax, Tensor targets, int N, int V,
                                         int valid, int vocab_begin) {
    float* out = sums.f32();
    const float* z = logits.f32();
    const float* m = rowmax.f32();
    const int32_t* tgt = targets.i32();
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; ++n) {
        const float* row = z + size_t(n) * V;
        const float sum = sum_exp(row, valid, m[n]);
        const int t = tgt[n] - vocab_begin;
        out[2 * size_t(n)] = sum;
        out[2 * size_t(n) + 1] = t >= 0 && t < valid ? row[t] : 0.0f;
    }
}

void CpuBackend::crossentropy_finish(Tensor losses, Tensor logits, Tensor rowmax, Tensor sums, int N, int V,
                                     int valid) {
    float* loss = losses.f32();
    float* z = logits.f32();
    const float* m = rowmax.f32();
    const float* s = sums.f32();
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; ++n) {
        float* row = z + size_t(n) * V;
        const float sum = s[2 * size_t(n)], target_logit = s[2 * size_t(n) + 1];
        exp_scaled_row(row, valid, m[n], 1.0f / sum);
        std::fill(row + valid, row + V, 0.0f);
        loss[n] = std::log(sum) + m[n] - target_logit;
    }
}

}  // namespace us
