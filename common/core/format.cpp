#include "common/core/format.h"

#include <fmt/format.h>

#include <cmath>

namespace us {

std::string format_bytes(int64_t bytes) {
    const double b = double(bytes);
    if (std::abs(b) >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
    if (std::abs(b) >= 1024.0 * 1024) return fmt::format("{:.2f} MiB", b / (1024.0 * 1024));
    if (std::abs(b) >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
    return fmt::format("{} B", bytes);
}

}  // namespace us
