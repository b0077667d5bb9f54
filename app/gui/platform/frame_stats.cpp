// The frame benchmark's line on stderr (frame_stats.h).
#include "app/gui/platform/frame_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "profiler/trace/trace_store.h"

namespace us::gui {

FrameStats FrameStats::from_environment() {
    const char* every = std::getenv("ULTRASCOPE_FRAME_STATS_S");
    return FrameStats(every ? std::atof(every) : 0);
}

void FrameStats::add_frame(double build_ms, const prof::TraceStore* store) {
    if (m_every_s <= 0) return;
    m_ms.push_back(build_ms);
    const auto now = std::chrono::steady_clock::now();
    if (std::chrono::duration<double>(now - m_last).count() < m_every_s) return;
    m_last = now;
    std::sort(m_ms.begin(), m_ms.end());
    const auto at = [&](double q) { return m_ms[std::min(m_ms.size() - 1, size_t(q * double(m_ms.size())))]; };
    std::string views;
    for (auto& [name, ms] : m_view_ms) {
        views += fmt::format(" {}={:.3f}", name, ms / double(m_ms.size()));
        ms = 0;
    }
    std::fprintf(
        stderr,
        "frame_stats frames %zu p50_ms %.3f p99_ms %.3f max_ms %.3f store_bytes %zu store_at_cap %d views_mean_ms%s\n",
        m_ms.size(), at(0.5), at(0.99), m_ms.back(), store ? store->bytes_used() : size_t(0),
        store && store->at_cap() ? 1 : 0, views.c_str());
    m_ms.clear();
}

}  // namespace us::gui
