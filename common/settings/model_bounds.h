// The largest model this tool sizes, field by field and in all: far beyond any model trained (Llama 3 405B: hidden
// 16384, vocab 128256, 126 layers), so that byte and FLOP counts stay inside 64 bits (a hidden of 2^30 counted a
// negative parameter total). The engine's flags (GPTConfig::validate) and the planner's model descriptions
// (predict::check_model) share them.
#pragma once

#include <cstdint>

namespace us::model_bounds {

inline constexpr int64_t vocab = int64_t(1) << 22, hidden = int64_t(1) << 17, layers = 4096, heads = 4096,
                         seq = int64_t(1) << 21, experts = 4096;
inline constexpr double params = 1e15;

}  // namespace us::model_bounds
