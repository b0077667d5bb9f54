// Timing for the C++ benchmarks: the best wall time of repeated runs, after one warm-up run (first-touch page faults,
// cold caches and lazily built tables land in the warm-up, not in the figure).
#pragma once

#include <algorithm>
#include <chrono>

namespace us::bench {

inline double seconds_now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <typename Fn>
double best_seconds(int reps, Fn&& fn) {
    fn();
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        const double t0 = seconds_now();
        fn();
        best = std::min(best, seconds_now() - t0);
    }
    return best;
}

}  // namespace us::bench
