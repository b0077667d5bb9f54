// Which steps describe the steady state, one rule for every figure "over the steady steps": all but step 1 when
// there are several (step 1 allocates gradients and optimizer state and warms caches up); a trace that starts later
// (PyTorch's profiler after its warm-up, a capture of a running job) keeps all its steps.
#pragma once

#include <cstddef>
#include <string>

namespace us::prof {

// The index of the first steady step among `count` steps in order, the first of which is step `first_step`.
constexpr size_t first_steady_index(int first_step, size_t count) { return count > 1 && first_step <= 1 ? 1 : 0; }

// Which steps the rule took, in words: "step 1 left out", "all 3 steps (the trace starts at step 4)".
inline std::string steady_steps_said(int first_step, size_t count) {
    if (first_steady_index(first_step, count) == 1) return "step 1 left out";
    if (count == 1) return "the only step";
    const std::string all = "all " + std::to_string(count) + " steps";
    return first_step > 1 ? all + " (the trace starts at step " + std::to_string(first_step) + ")" : all;
}

}  // namespace us::prof
