// The deadline of a launch's progress and the message that ends a stalled one (progress_deadline.h).
#include "app/launch/progress_deadline.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>

namespace us::app {

ProgressDeadline::ProgressDeadline(std::string what, double seconds)
    : m_what(std::move(what)),
      m_seconds(seconds),
      m_last(Clock::now()),
      m_last_wall(std::chrono::system_clock::now()) {}

void ProgressDeadline::progress(const std::string& sign) {
    m_longest_wait = std::max(m_longest_wait, idle_seconds());
    m_last = Clock::now();
    m_last_wall = std::chrono::system_clock::now();
    if (!sign.empty()) m_last_sign = sign;
}

double ProgressDeadline::idle_seconds() const { return std::chrono::duration<double>(Clock::now() - m_last).count(); }

double ProgressDeadline::longest_wait_seconds() const { return std::max(m_longest_wait, idle_seconds()); }

std::string ProgressDeadline::stalled_message(const std::string& advice) const {
    const std::time_t since = std::chrono::system_clock::to_time_t(m_last_wall);
    char clock[16] = "?";
    std::strftime(clock, sizeof clock, "%H:%M:%S", std::localtime(&since));
    return fmt::format(
        "{} made no progress for {:.0f} s (its deadline: {:g} s): nothing since {}{}. Ended it and every "
        "process it started. {}",
        m_what, idle_seconds(), m_seconds, clock,
        m_last_sign.empty() ? ", when it started" : "; its last sign of progress: " + m_last_sign, advice);
}

double LaunchPace::deadline_seconds() const {
    return fixed_seconds > 0 ? fixed_seconds : std::max(floor_seconds, 10 * longest_wait_seconds);
}

void LaunchPace::saw(const ProgressDeadline& launch) {
    longest_wait_seconds = std::max(longest_wait_seconds, launch.longest_wait_seconds());
}

std::string last_line_of(const std::string& output) {
    const size_t end = output.find_last_not_of("\r\n \t");
    if (end == std::string::npos) return {};
    const size_t newline = output.find_last_of("\r\n", end);
    const size_t begin = newline == std::string::npos ? 0 : newline + 1;
    std::string line = output.substr(begin, end + 1 - begin);
    if (line.size() > 80) line = line.substr(0, 77) + "...";
    return "'" + line + "'";
}

}  // namespace us::app
