#include "profiler/record/clock.h"

#include <time.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

namespace us::prof {

int64_t monotonic_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// The TSC is a good clock only when it ticks at a constant rate through sleep states (constant_tsc and
// nonstop_tsc) and the kernel itself trusts it as its clocksource.
bool tsc_usable() {
#if defined(__x86_64__)
    if (const char* env = std::getenv("US_PROFILER_CLOCK"); env && std::strcmp(env, "monotonic") == 0) return false;
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    bool constant = false, nonstop = false;
    while (std::getline(cpuinfo, line))
        if (line.rfind("flags", 0) == 0) {
            constant = line.find(" constant_tsc") != std::string::npos;
            nonstop = line.find(" nonstop_tsc") != std::string::npos;
            break;
        }
    std::ifstream source("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    std::string current;
    source >> current;
    return constant && nonstop && current == "tsc";
#else
    return false;
#endif
}

TickConverter::TickConverter() {
    m_identity = !tsc_usable();
    m_base_ns = monotonic_ns();
    m_base_ticks = read_ticks();
    m_ns_per_tick = 1.0;
    if (!m_identity) {
        // A first slope from a 2 ms sample; update() refines it as time goes by.
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        const int64_t ns = monotonic_ns(), ticks = read_ticks();
        m_ns_per_tick = double(ns - m_base_ns) / double(ticks - m_base_ticks);
    }
}

void TickConverter::update() {
    if (m_identity) return;
    const int64_t ns = monotonic_ns(), ticks = read_ticks();
    if (ticks > m_base_ticks + 1000000) m_ns_per_tick = double(ns - m_base_ns) / double(ticks - m_base_ticks);
}

int64_t TickConverter::to_ns(int64_t ticks) const {
    if (m_identity) return ticks;
    return m_base_ns + int64_t(double(ticks - m_base_ticks) * m_ns_per_tick);
}

double TickConverter::ns_per_tick() const { return m_ns_per_tick; }

}  // namespace us::prof
