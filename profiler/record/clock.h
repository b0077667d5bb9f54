// The recording clock. The hot path reads the CPU's time-stamp counter (about 10 ns; clock_gettime costs 23 ns
// here, and a span needs two reads); the collector converts ticks to CLOCK_MONOTONIC nanoseconds with a linear
// calibration that it refines while the run goes on. Ranks on one host share CLOCK_MONOTONIC, so their spans land
// on one time base without any exchange. Without an invariant TSC (or off x86) ticks are nanoseconds already.
#pragma once

#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace us::prof {

int64_t monotonic_ns();

bool tsc_usable();

inline int64_t read_ticks() {
#if defined(__x86_64__)
    static const bool use_tsc = tsc_usable();
    if (use_tsc) return int64_t(__rdtsc());
#endif
    return monotonic_ns();
}

// ticks -> ns: t_ns = base_ns + (ticks - base_ticks) * ns_per_tick, fitted on two (ticks, ns) samples taken far
// apart; update() moves the far sample forward so the slope only improves. Owned by one thread (the collector).
class TickConverter {
public:
    TickConverter();
    void update();
    int64_t to_ns(int64_t ticks) const;
    double ns_per_tick() const;

private:
    int64_t m_base_ticks, m_base_ns;
    double m_ns_per_tick;
    bool m_identity;
};

}  // namespace us::prof
