// Which steps describe the steady state, one rule for every figure "over the steady steps": all but step 1 when
// there are several (step 1 allocates gradients and optimizer state and warms caches up); a trace that starts later
// (PyTorch's profiler after its warm-up, a capture of a running job) keeps all its steps.
#pragma once

#include <cstddef>

namespace us::prof {

// The index of the first steady step among `count` steps in order, the first of which is step `first_step`.
constexpr size_t first_steady_index(int first_step, size_t count) { return count > 1 && first_step <= 1 ? 1 : 0; }

}  // namespace us::prof
