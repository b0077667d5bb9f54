// The categories every tracked byte belongs to. The memory anatomy view, the predictions and the tests all
// speak in these; the order is the stacking order of the memory plot (persistent state at the bottom).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace us {

enum class MemCategory : uint8_t {
    params = 0,
    grads,
    master_params,
    optimizer_state,
    activations,
    temporaries,
    comm_buffers,
    workspace,
};
inline constexpr int kMemCategoryCount = 8;

inline constexpr std::array<std::string_view, kMemCategoryCount> kMemCategoryNames = {
    "params", "grads", "master_params", "optimizer_state", "activations", "temporaries", "comm_buffers", "workspace"};

constexpr std::string_view mem_category_name(MemCategory c) { return kMemCategoryNames[size_t(c)]; }

inline std::optional<MemCategory> mem_category_from_name(std::string_view name) {
    for (int i = 0; i < kMemCategoryCount; ++i)
        if (kMemCategoryNames[i] == name) return MemCategory(i);
    return std::nullopt;
}

}  // namespace us
