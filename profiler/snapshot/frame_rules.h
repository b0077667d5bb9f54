// What a stack of frames says about an allocation: the frame that made it (the first frame, innermost first, that is
// neither PyTorch's own code nor C/C++ nor the Python runtime) and the category it is inferred to belong to
// (optimizer state, gradients, parameters, activations) from the names of the frames. docs/pytorch-memory.md.
#pragma once

#include <cstdint>
#include <string>

#include "profiler/snapshot/memory_snapshot.h"

namespace us::snap {

// Whether a frame is PyTorch internals, C/C++ or the Python runtime rather than the user's code.
bool is_internal_frame(const SnapshotFrame& f);
// The user's frame of a stack (innermost first), or -1 when every frame is internal (or the stack is empty).
int64_t user_frame(const MemorySnapshot& snap, uint32_t stack);
// "train.py:42 in build_model", or "(no user frame)".
std::string frame_label(const MemorySnapshot& snap, int64_t frame_id);

enum class MemoryCategory : uint8_t { parameters, optimizer_state, gradients, activations, unknown };
const char* category_name(MemoryCategory c);
// How a category is known: "inferred" from the frames, or "unknown" when no rule matched.
inline const char* category_basis(MemoryCategory c) { return c == MemoryCategory::unknown ? "unknown" : "inferred"; }
// The category a stack's frames suggest; unknown when no rule matches (the rules: docs/pytorch-memory.md).
MemoryCategory categorize_stack(const MemorySnapshot& snap, uint32_t stack);

}  // namespace us::snap
