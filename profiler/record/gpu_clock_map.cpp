#include "profiler/record/gpu_clock_map.h"

#include <algorithm>
#include <cmath>

namespace us::prof {

void GpuClockMap::add_sample(uint64_t gpu_ns, int64_t host_ns) {
    m_window[m_count % kWindow] = {gpu_ns, host_ns};
    ++m_count;
    fit();
}

void GpuClockMap::fit() {
    const size_t n = std::min(m_count, kWindow);
    // Deviations from the newest sample: small numbers, exact in a double.
    const Sample& ref = m_window[(m_count - 1) % kWindow];
    double sx = 0, sy = 0;
    uint64_t gpu_min = ref.gpu, gpu_max = ref.gpu;
    for (size_t i = 0; i < n; ++i) {
        sx += double(int64_t(m_window[i].gpu - ref.gpu));
        sy += double(m_window[i].host - ref.host);
        gpu_min = std::min(gpu_min, m_window[i].gpu);
        gpu_max = std::max(gpu_max, m_window[i].gpu);
    }
    const double mx = sx / double(n), my = sy / double(n);
    double slope = 1.0;
    if (n >= 2 && int64_t(gpu_max - gpu_min) >= kMinRateSpanNs) {
        double sxx = 0, sxy = 0;
        for (size_t i = 0; i < n; ++i) {
            const double dx = double(int64_t(m_window[i].gpu - ref.gpu)) - mx;
            const double dy = double(m_window[i].host - ref.host) - my;
            sxx += dx * dx;
            sxy += dx * dy;
        }
        const double fitted = sxx > 0 ? sxy / sxx : 1.0;
        if (std::abs(fitted - 1.0) <= kMaxRateError) slope = fitted;
    }
    // The line passes through the samples' mean.
    m_slope = slope;
    m_gpu_ref = ref.gpu + uint64_t(std::llround(mx));
    m_host_ref = ref.host + std::llround(my);
}

int64_t GpuClockMap::to_host(uint64_t gpu_ns) const {
    if (m_count == 0) return int64_t(gpu_ns);
    const double dx = double(int64_t(gpu_ns - m_gpu_ref));
    return m_host_ref + std::llround(m_slope * dx);
}

int64_t GpuClockMap::offset_ns() const {
    if (m_count == 0) return 0;
    const Sample& newest = m_window[(m_count - 1) % kWindow];
    return to_host(newest.gpu) - int64_t(newest.gpu);
}

}  // namespace us::prof
