// The untracked device memory, named (device_footprint.h).
#include "engine/backend/device_footprint.h"

#include <algorithm>

#include "engine/backend/backend.h"

namespace us {

int64_t DeviceFootprint::untracked(int64_t device_used, int64_t allocator_reserved) {
    return device_used < 0 ? -1 : std::max<int64_t>(0, device_used - allocator_reserved);
}

int64_t DeviceFootprint::untracked_now(Backend& backend) {
    const int64_t used = backend.device_used_bytes();
    return used < 0 ? -1 : untracked(used, int64_t(backend.allocator().stats().reserved));
}

void DeviceFootprint::note(const std::string& name, int64_t before, int64_t now) {
    if (before < 0 || now < 0) return;
    m_parts.push_back({name, std::max<int64_t>(0, now - before)});
}

DeviceFootprint& device_footprint() {
    static DeviceFootprint footprint;
    return footprint;
}

}  // namespace us
