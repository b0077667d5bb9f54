// The rules that read a stack (frame_rules.h). They look at file names and function names only: a heuristic,
// which is why the report labels every category "inferred" and the rest "unknown".
#include "profiler/snapshot/frame_rules.h"

#include <fmt/core.h>

namespace us::snap {
namespace {

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }
bool ends_with(std::string_view s, std::string_view tail) {
    return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

}  // namespace

bool is_internal_frame(const SnapshotFrame& f) {
    const std::string_view file = f.filename, name = f.name;
    if (file.empty() || file == "??") return true;
    // C/C++ frames (recorded with context="all" / stacks="all")
    if (ends_with(file, ".cpp") || ends_with(file, ".cc") || ends_with(file, ".h") || ends_with(file, ".cu") ||
        ends_with(file, ".cuh") || ends_with(file, ".c") || contains(name, "::") || ends_with(file, ".so"))
        return true;
    // PyTorch's own Python (an installed torch or a source checkout), and the Python runtime
    if (contains(file, "/torch/") || file.starts_with("torch/") || contains(file, "<frozen") ||
        contains(file, "/lib/python3") && !contains(file, "site-packages"))
        return true;
    return false;
}

int64_t user_frame(const MemorySnapshot& snap, uint32_t stack) {
    for (const uint32_t id : snap.stack(stack))
        if (!is_internal_frame(snap.frame(id))) return id;
    return -1;
}

std::string frame_label(const MemorySnapshot& snap, int64_t frame_id) {
    if (frame_id < 0) return "(no user frame)";
    const SnapshotFrame& f = snap.frame(uint32_t(frame_id));
    return fmt::format("{}:{} in {}", f.filename, f.line, f.name);
}

const char* category_name(MemoryCategory c) {
    switch (c) {
        case MemoryCategory::parameters:
            return "parameters";
        case MemoryCategory::optimizer_state:
            return "optimizer state";
        case MemoryCategory::gradients:
            return "gradients and backward temporaries";
        case MemoryCategory::activations:
            return "activations";
        case MemoryCategory::unknown:
            return "unknown";
    }
    return "?";
}

MemoryCategory categorize_stack(const MemorySnapshot& snap, uint32_t stack) {
    // The first rule that any frame matches, in this order: the optimizer's step, then backward, then parameter
    // creation, then forward. (A forward run under backward - activation checkpointing - counts as backward.)
    bool optimizer = false, backward = false, parameters = false, forward = false;
    for (const uint32_t id : snap.stack(stack)) {
        const SnapshotFrame& f = snap.frame(id);
        const std::string_view file = f.filename, name = f.name;
        if (contains(file, "torch/optim/") || contains(file, "/optimizer") || name == "step" ||
            contains(name, "optimizer_step") || contains(name, "_init_group"))
            optimizer = true;
        if (contains(name, "backward") || contains(file, "torch/autograd/") || contains(name, "autograd::Engine") ||
            contains(name, "run_backward"))
            backward = true;
        if (name == "__init__" || name == "reset_parameters" || name == "_apply" || name == "to" || name == "cuda" ||
            contains(name, "init_weights") || contains(file, "torch/nn/init.py") || name == "to_empty" ||
            contains(name, "Parameter"))
            parameters = true;
        if (name == "forward" || name == "_call_impl" || name == "_wrapped_call_impl" || contains(name, "forward"))
            forward = true;
    }
    if (optimizer) return MemoryCategory::optimizer_state;
    if (backward) return MemoryCategory::gradients;
    if (parameters) return MemoryCategory::parameters;
    if (forward) return MemoryCategory::activations;
    return MemoryCategory::unknown;
}

}  // namespace us::snap
