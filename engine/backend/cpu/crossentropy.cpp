// Softmax cross-entropy over fp32 logits, fused in place: forward turns logits into probabilities and writes each
// token's loss; backward turns the probabilities into dlogits = (probs - onehot) * dloss.
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

void CpuBackend::crossentropy_backward(Tensor dlogits, Tensor targets, float dloss, int N, int V) {
    float* p = dlogits.f32();
    const int32_t* tgt = targets.i32();
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; ++n) {
        float* row = p + size_t(n) * V;
        for (int i = 0; i < V; ++i) row[i] *= dloss;
        row[tgt[n]] -= dloss;
    }
}

}  // namespace us
