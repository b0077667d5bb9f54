// The frame benchmark (the soak bench, tests/bench/bench_soak.py): ULTRASCOPE_FRAME_STATS_S=N prints, every N
// seconds, one line on stderr with the frames built since (count, median, 99th percentile, max of the frame build:
// update, layout and draw lists, without the swap), each view's mean time and the trace store's size. Off by default.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace us::prof {
class TraceStore;
}

namespace us::gui {

class FrameStats {
public:
    explicit FrameStats(double every_s = 0) : m_every_s(every_s), m_last(std::chrono::steady_clock::now()) {}
    // From ULTRASCOPE_FRAME_STATS_S (off when unset).
    static FrameStats from_environment();

    // Time spent in `key` (a view, or "update") this frame; summed until the next line.
    void add_view_ms(const std::string& key, double ms) { m_view_ms[key] += ms; }
    // One frame built in build_ms; prints the line when it is due.
    void add_frame(double build_ms, const prof::TraceStore* store);

private:
    double m_every_s;
    std::chrono::steady_clock::time_point m_last;
    std::vector<double> m_ms;
    std::map<std::string, double> m_view_ms;
};

// Milliseconds since t0, for the timings above.
inline double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace us::gui
