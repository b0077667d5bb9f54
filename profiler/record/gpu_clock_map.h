// CUPTI timestamps -> the host clock of the trace (CLOCK_MONOTONIC ns, profiler/record/clock.h). The collector
// samples both clocks back to back now and then; the map is the least-squares line through the most recent
// samples. Both clocks count nanoseconds, so a slope far from 1 can only be noise: with one sample, or samples too
// close together to measure a rate, the slope is 1 and only the offset is fitted.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace us::prof {

class GpuClockMap {
public:
    // A pair read back to back: `host_ns` should be the midpoint of two host reads around the CUPTI read.
    void add_sample(uint64_t gpu_ns, int64_t host_ns);
    // Host nanoseconds of a CUPTI timestamp; the identity until the first sample.
    int64_t to_host(uint64_t gpu_ns) const;

    size_t samples() const { return m_count; }
    double slope() const { return m_slope; }
    // host - gpu at the newest sample's time: 0 when CUPTI already reports CLOCK_MONOTONIC.
    int64_t offset_ns() const;

    static constexpr size_t kWindow = 64;                  // samples the fit uses (the newest)
    static constexpr int64_t kMinRateSpanNs = 10'000'000;  // samples must span 10 ms to fit a rate
    static constexpr double kMaxRateError = 1e-3;          // |slope - 1| beyond 1000 ppm is rejected as noise

private:
    struct Sample {
        uint64_t gpu;
        int64_t host;
    };
    void fit();

    std::array<Sample, kWindow> m_window{};
    size_t m_count = 0;  // samples added (the window holds the newest min(count, kWindow))
    // The line: host = m_host_ref + m_slope * (gpu - m_gpu_ref), around a reference inside the window so that the
    // double arithmetic stays exact to the nanosecond.
    uint64_t m_gpu_ref = 0;
    int64_t m_host_ref = 0;
    double m_slope = 1.0;
};

}  // namespace us::prof
