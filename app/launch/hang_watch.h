// Notices a launched run that stops making progress (docs/engine-flight-recorder.md): no new step for the hang
// limit, which is --hang-timeout S when the run's flags give it, else sized from the run's own pace: the longest
// wait between two steps seen so far (a checkpoint's save included) times 10, at least 10 s; before the first step
// the limit is 2 minutes (MPI's wire-up, the model's initialisation and the first step's allocations), or S when
// longer. Fed the time and the latest step, it decides nothing else: LiveRun asks the ranks for their dumps and
// ends the run. Unit-tested alone (tests/unit/test_hang_watch.cpp).
#pragma once

#include <string>

namespace us::app {

class HangWatch {
public:
    static constexpr double kFirstStepLimitS = 120, kMinLimitS = 10, kStepsPerLimit = 10;

    // `timeout_s` > 0: the run's --hang-timeout; 0: sized from the steps.
    explicit HangWatch(double timeout_s = 0) : m_timeout_s(timeout_s) {}
    // The latest step finished (0: none yet) and its time on the slowest rank (ms), at `now_s` (seconds since the
    // launch).
    void observe(int step, double step_ms, double now_s);
    // The limit in force now, in seconds, and where it comes from in words ("before the first step: 120 s, or
    // --hang-timeout S when longer").
    double limit_s() const;
    std::string limit_said() const;
    // No new step for longer than the limit.
    bool stalled(double now_s) const { return now_s - m_progress_s > limit_s(); }
    int last_step() const { return m_step; }
    double since_progress_s(double now_s) const { return now_s - m_progress_s; }

private:
    double m_timeout_s;
    int m_step = 0;
    double m_progress_s = 0;  // when the latest step was first seen (the launch before any)
    double m_slowest_s = 0;   // the longest wait between two steps after the first, or a step's own time
};

}  // namespace us::app
