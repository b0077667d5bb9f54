// An injected straggler (--slow-rank R --slow-factor F; docs/blame.md): after each forward and backward of rank R,
// (F - 1) times that phase's time of real GEMM work, in spans named "injected slowdown (--slow-rank)", so that the
// rank computes F times as long and the others wait for it where they meet it (a data-parallel all-reduce, the next
// pipeline stage). The rank's metadata says it was injected (injected_slow_factor), wherever it shows.
#pragma once

#include "engine/backend/backend.h"

namespace us {

class InjectedSlowdown {
public:
    InjectedSlowdown(Backend& backend, double factor);
    bool active() const { return m_factor > 1.0; }
    // After `seconds` of the rank's own compute: (factor - 1) x that much more.
    void after(double seconds);

private:
    Backend& m_be;
    double m_factor;
    Allocation m_buffers;
    Tensor m_a, m_b, m_c;
};

}  // namespace us
