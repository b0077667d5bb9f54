// The coarse kinds a step's compute is split into when two runs are compared (docs/diff.md): gemm, attention,
// elementwise, optimizer and the rest. One mapping from an op table row's shown kind (an engine op's class, or a
// GPU kernel's fine kind, op_table.h), so that an engine run, a PyTorch run on a GPU and one on a CPU split alike.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace us::prof {

enum class ComputeKind : uint8_t { gemm = 0, attention, elementwise, optimizer, other };
inline constexpr int kComputeKindCount = int(ComputeKind::other) + 1;
inline constexpr std::array<std::string_view, kComputeKindCount> kComputeKindNames = {
    "gemm", "attention", "elementwise", "optimizer", "other"};

// From OpRow::kind ("gemm", "conv", "norm", "activation", "elementwise", "reduction", "optimizer" ...).
inline ComputeKind compute_kind(std::string_view row_kind) {
    if (row_kind == "gemm" || row_kind == "conv") return ComputeKind::gemm;
    if (row_kind == "attention") return ComputeKind::attention;
    if (row_kind == "norm" || row_kind == "activation" || row_kind == "elementwise" || row_kind == "reduction" ||
        row_kind == "embedding" || row_kind == "loss")
        return ComputeKind::elementwise;
    if (row_kind == "optimizer") return ComputeKind::optimizer;
    return ComputeKind::other;
}

}  // namespace us::prof
