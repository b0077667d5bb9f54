// Branch-free exp and tanh that the compiler vectorises inside `omp simd` loops. libm's tanhf is a scalar call
// (about 30% of a training step went to it in GeLU); these are exact to a few ulp, which is all GeLU needs
// (it uses 1 + tanh, so tanh's absolute error is what counts).
#pragma once

#include <cstdint>

#include "engine/backend/cpu/isa_clones.h"

namespace us::cpu {

// e^x for x in [-87, 0]: x = k ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2), e^r by its degree-7 Taylor
// polynomial (remainder below 6e-9 relative), 2^k put straight into the exponent bits.
US_CPU_INLINE float exp_nonpositive(float x) {
    x = x < -87.0f ? -87.0f : x;
    const float kf = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
    const float r = (x - kf * 0.693145751953125f) - kf * 1.428606765330187045e-06f;
    const float p =
        1.0f +
        r * (1.0f +
             r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720 + r * (1.0f / 5040)))))));
    const float scale = __builtin_bit_cast(float, uint32_t(int32_t(kf) + 127) << 23);
    return p * scale;
}

// tanh(u) = sign(u) (1 - e) / (1 + e), e = exp(-2|u|); |u| beyond 9 rounds to +-1 in fp32 anyway.
US_CPU_INLINE float tanh_fast(float u) {
    const float a = u < 0.0f ? -u : u;
    const float e = exp_nonpositive(-2.0f * (a > 9.0f ? 9.0f : a));
    const float t = (1.0f - e) / (1.0f + e);
    return u < 0.0f ? -t : t;
}

}  // namespace us::cpu
