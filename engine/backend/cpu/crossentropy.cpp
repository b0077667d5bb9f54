// Softmax cross-entropy over fp32 logits, fused in place: forward turns logits into probabilities and writes each
// token's loss; backward turns the probabilities into dlogits = (probs - onehot) * dloss. The vocabulary-parallel
// form splits the forward into three steps around the tensor-parallel group's reductions (backend.h).
#include <algorithm>
#include <cmath>

#include "engine/backend/cpu/cpu_backend.h"

namespace us {

void CpuBackend::crossentropy_forward(Tensor losses, Tensor logits, Tensor targets, int N, int V) {
    float* loss = losses.f32();
    float* z = logits.f32();
    const int32_t* tgt = targets.i32();
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; ++n) {
        float* row = z + size_t(n) * V;
        float maxv = row[0];
        for (int i = 1; i < V; ++i) maxv = std::max(maxv, row[i]);
        float sum = 0.0f;
        for (int i = 0; i < V; ++i) {
            row[i] = std::exp(row[i] - maxv);
            sum += row[i];
        }
        const float inv = 1.0f / sum;
        for (int i = 0; i < V; ++i) row[i] *= inv;
        loss[n] = -std::log(std::max(row[tgt[n]], 1e-30f));
    }
}

void CpuBackend::crossentropy_backward(Tensor dlogits, Tensor targets, float dloss, int N, int V, int vocab_begin) {
    float* p = dlogits.f32();
    const int32_t* tgt = targets.i32();
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; ++n) {
        float* row = p + size_t(n) * V;
        for (int i = 0; i < V; ++i) row[i] *= dloss;
        const int t = tgt[n] - vocab_begin;
        if (t >= 0 && t < V) row[t] -= dloss;
    }
}

void CpuBackend::crossentropy_local_max(Tensor rowmax, Tensor logits, int N, int V, int valid) {
    float* out = rowmax.f32();
    const float* z = logits.f32();
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; ++n) {
        const float* row = z + size_t(n) * V;
        float m = -INFINITY;  // a rank holding only padding contributes nothing to the maximum
        for (int i = 0; i < valid; ++i) m = std::max(m, row[i]);
        out[n] = m;
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
        float sum = 0.0f;
        for (int i = 0; i < valid; ++i) sum += std::exp(row[i] - m[n]);
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
        const float inv = 1.0f / sum;
        for (int i = 0; i < valid; ++i) row[i] = std::exp(row[i] - m[n]) * inv;
        for (int i = valid; i < V; ++i) row[i] = 0.0f;
        loss[n] = std::log(sum) + m[n] - target_logit;
    }
}

}  // namespace us
