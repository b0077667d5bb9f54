// A softmax over one row in place: the max and sum in fixed-order lanes (lane_reductions.h), the branch-free exp
// (fast_math.h). Inlined into its callers' instruction-set clones (isa_clones.h): the attention probabilities and the
// cross-entropy's logits.
#pragma once

#include "engine/backend/cpu/fast_math.h"
#include "engine/backend/cpu/isa_clones.h"
#include "engine/backend/cpu/lane_reductions.h"

namespace us::cpu {

// row[0, n) becomes softmax(row[0, n)). n >= 1.
US_CPU_INLINE void softmax_in_place(float* row, int n) {
    const float maxv = max_lanes(row, n);
#pragma omp simd
    for (int j = 0; j < n; ++j) row[j] = exp_nonpositive(row[j] - maxv);
    const float inv = 1.0f / sum_lanes(row, n);
#pragma omp simd
    for (int j = 0; j < n; ++j) row[j] *= inv;
}

}  // namespace us::cpu
