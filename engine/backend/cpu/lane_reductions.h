// Sums and maxima over a row in 8 interleaved partials, combined in a fixed order. One running sum is a chain the
// compiler may not reorder (that would change the rounding), so it stays scalar; 8 partials are one AVX2 register
// (half of an AVX-512 one) and vectorise. The order is part of the code, so the bits are the same on every machine
// and every run.
#pragma once

#include "engine/backend/cpu/isa_clones.h"

namespace us::cpu {

constexpr int kLanes = 8;

US_CPU_INLINE float combine_lanes(float* acc) {
    for (int l = 0; l < kLanes / 2; ++l) acc[l] += acc[l + kLanes / 2];
    return (acc[0] + acc[2]) + (acc[1] + acc[3]);
}

// sum of term(i) for i in [0, n)
template <typename Term>
US_CPU_INLINE float sum_lanes(int n, Term term) {
    float acc[kLanes] = {};
    int i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (int l = 0; l < kLanes; ++l) acc[l] += term(i + l);
    for (int l = 0; i + l < n; ++l) acc[l] += term(i + l);
    return combine_lanes(acc);
}

US_CPU_INLINE float sum_lanes(const float* x, int n) {
    return sum_lanes(n, [x](int i) { return x[i]; });
}

US_CPU_INLINE float dot_lanes(const float* x, const float* y, int n) {
    return sum_lanes(n, [x, y](int i) { return x[i] * y[i]; });
}

// The maximum is exact whatever the order; lanes only let it vectorise. n >= 1.
US_CPU_INLINE float max_lanes(const float* x, int n) {
    float acc[kLanes];
    for (int l = 0; l < kLanes; ++l) acc[l] = x[0];
    int i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (int l = 0; l < kLanes; ++l) acc[l] = acc[l] < x[i + l] ? x[i + l] : acc[l];
    for (int l = 0; i + l < n; ++l) acc[l] = acc[l] < x[i + l] ? x[i + l] : acc[l];
    float m = acc[0];
    for (int l = 1; l < kLanes; ++l) m = m < acc[l] ? acc[l] : m;
    return m;
}

}  // namespace us::cpu
