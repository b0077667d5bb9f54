// Global gradient-norm clipping, as torch.nn.utils.clip_grad_norm_: coefficient min(1, max_norm / (norm + 1e-6)),
// applied inside the optimizer step (no extra pass over the gradients).
#pragma once

#include <cmath>

namespace us {

inline float clip_coefficient(double grad_norm, double max_norm) {
    if (max_norm <= 0.0) return 1.0f;
    const float coef = float(max_norm) / (float(grad_norm) + 1e-6f);
    return coef < 1.0f ? coef : 1.0f;
}

}  // namespace us
