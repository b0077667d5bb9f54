// A launch that stops making progress is ended with a message, never left to hang (docs/operations.md, "When a
// launch stops making progress"). Each watcher says what progress is for its launch (a measurement's line, a step, a
// rank connecting, any output) and calls progress() on each sign of it; once no sign has come for the deadline, the
// watcher ends the launch's whole process tree (Launcher::end) and prints stalled_message(): what stalled, since
// when, its last sign, and what to try. Training steps have their own watch (`ultrascope run --hang-timeout`); this
// one covers what is not a step: measurements, a launch's start-up, and whatever a caller names.
#pragma once

#include <chrono>
#include <string>

namespace us::app {

class ProgressDeadline {
public:
    // `what`: the launch as the message names it ("bench_collectives across nodes"); `seconds` > 0.
    ProgressDeadline(std::string what, double seconds);
    // A sign of progress (its text is kept for the message: a line of output, "rank 1 connected").
    void progress(const std::string& sign);
    bool expired() const { return idle_seconds() > m_seconds; }
    double idle_seconds() const;
    double seconds() const { return m_seconds; }
    // The longest wait between two signs of progress seen so far (the start up to the first sign included).
    double longest_wait_seconds() const;
    // "WHAT made no progress for N s (its deadline: D s): nothing since HH:MM:SS; its last sign of
    // progress: '...'. Ended it and every process it started. ADVICE"
    std::string stalled_message(const std::string& advice) const;

private:
    using Clock = std::chrono::steady_clock;
    std::string m_what;
    double m_seconds;
    Clock::time_point m_last;
    std::chrono::system_clock::time_point m_last_wall;
    std::string m_last_sign;
    double m_longest_wait = 0;
};

// A command's deadline for its next launch, sized from what its launches have shown so far: a fixed one where the
// user gave it (--progress-timeout S), else the larger of a floor (a launch's start-up on a busy machine) and ten
// times the longest wait between two signs of progress seen so far (a slow machine stays slow, and is not stalled).
struct LaunchPace {
    double fixed_seconds = 0;  // --progress-timeout S (0: sized)
    double floor_seconds = 120;
    double longest_wait_seconds = 0;
    double deadline_seconds() const;
    void saw(const ProgressDeadline& launch);  // a finished launch's waits
};

// A short line for a sign of progress: the last non-empty line of `output`, trimmed to 80 characters.
std::string last_line_of(const std::string& output);

}  // namespace us::app
