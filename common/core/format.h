// Human-readable quantities for messages, reports and views; no dependencies beyond the standard library and fmt.
#pragma once

#include <cstdint>
#include <string>

namespace us {

// "512 B", "1.5 KiB", "3.25 MiB", "1.20 GiB" (binary units, as the memory figures everywhere use).
std::string format_bytes(int64_t bytes);

}  // namespace us
