#include "profiler/record/clock.h"

#include <atomic>

#include <time.h>

#include <chrono>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

namespace us::prof {

namespace {
std::atomic<int64_t> g_testing_shift_ns{0};
}  // namespace

int64_t monotonic_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec + g_testing_shift_ns.load(std::memory_order_relaxed);
}

void set_clock_shift_for_testing(int64_t ns) { g_testing_shift_ns.store(ns, std::memory_order_relaxed); }

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

// A (ticks, ns) pair read back to back; the ticks are the midpoint of two reads around the clock call.
TickConverter::Point TickConverter::sample() const {
    const int64_t a = read_ticks();
    const int64_t ns = monotonic_ns();
    const int64_t b = read_ticks();
    return {a + (b - a) / 2, ns};
}

TickConverter::TickConverter() {
    m_identity = !tsc_usable();
    if (m_identity) return;
    m_points.push_back(sample());
    // The first slope from a 2 ms sample; every later point refines the map from there on.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    m_points.push_back(sample());
}

void TickConverter::add_point() {
    if (m_identity) return;
    const Point p = sample();
    if (p.ticks > m_points.back().ticks + 100000 && p.ns > m_points.back().ns) m_points.push_back(p);
}

int64_t TickConverter::to_ns(int64_t ticks) const {
    if (m_identity) return ticks;
    // The segment whose right end is the first point at or after `ticks` (the first or last one outside them).
    auto it = std::lower_bound(m_points.begin(), m_points.end(), ticks,
                               [](const Point& p, int64_t t) { return p.ticks < t; });
    if (it == m_points.begin()) ++it;
    if (it == m_points.end()) --it;
    const Point& a = *(it - 1);
    const Point& b = *it;
    const double slope = double(b.ns - a.ns) / double(b.ticks - a.ticks);
    return a.ns + int64_t(double(ticks - a.ticks) * slope);
}

double TickConverter::ns_per_tick() const {
    if (m_identity || m_points.size() < 2) return 1.0;
    const Point& a = m_points.front();
    const Point& b = m_points.back();
    return double(b.ns - a.ns) / double(b.ticks - a.ticks);
}

}  // namespace us::prof
