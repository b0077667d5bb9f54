// The recording clock. The hot path reads the CPU's time-stamp counter (about 10 ns; clock_gettime costs 23 ns
// here, and a span needs two reads); the collector converts ticks to CLOCK_MONOTONIC nanoseconds with a linear
// calibration that it refines while the run goes on. Ranks on one host share CLOCK_MONOTONIC, so their spans land
// on one time base without any exchange. Without an invariant TSC (or off x86) ticks are nanoseconds already.
#pragma once

#include <cstdint>
#include <vector>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace us::prof {

int64_t monotonic_ns();

// Testing only: shifts this process's clock by `ns`, as if it ran on another host whose CLOCK_MONOTONIC started at a
// different moment (ULTRASCOPE_FAKE_CLOCK_OFFSET_NS=RANK:NS; the offset estimate must find it and undo it).
void set_clock_shift_for_testing(int64_t ns);

bool tsc_usable();

inline int64_t read_ticks() {
#if defined(__x86_64__)
    static const bool use_tsc = tsc_usable();
    if (use_tsc) return int64_t(__rdtsc());
#endif
    return monotonic_ns();
}

// ticks -> ns by a piecewise-linear map through calibration points (ticks, CLOCK_MONOTONIC ns) that the
// collector takes after every drain: every event it converts lies before the newest point, so its time is an
// interpolation between two real clock readings. The map is continuous and monotonic (a later tick never maps to
// an earlier time, so back-to-back spans never overlap), and stays pinned to CLOCK_MONOTONIC, which ranks on one
// host share. Owned by one thread (the collector).
class TickConverter {
public:
    TickConverter();
    void add_point();  // call after reading the rings, before converting what was read
    int64_t to_ns(int64_t ticks) const;
    double ns_per_tick() const;

private:
    struct Point {
        int64_t ticks, ns;
    };
    Point sample() const;
    std::vector<Point> m_points;
    bool m_identity;
};

}  // namespace us::prof
