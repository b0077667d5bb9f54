// The hang limit of a launched run (hang_watch.h).
#include "app/launch/hang_watch.h"

#include <fmt/format.h>

#include <algorithm>

namespace us::app {

void HangWatch::observe(int step, double step_ms, double now_s) {
    if (step <= m_step) return;
    // The first step's wait includes the start-up: it sizes nothing. Later waits include whatever runs between
    // steps (a checkpoint's save), so a run that saves now and then is not taken for a hung one.
    if (m_step > 0) m_slowest_s = std::max(m_slowest_s, (now_s - m_progress_s) / std::max(1, step - m_step));
    m_slowest_s = std::max(m_slowest_s, step_ms / 1e3);
    m_step = step;
    m_progress_s = now_s;
}

std::string HangWatch::limit_said() const {
    const double limit = limit_s();
    if (m_step == 0)
        return fmt::format(
            "the limit before the first step: {:.0f} s (MPI's wire-up and the model's start take time; "
            "--hang-timeout S sets it where longer than {:.0f} s)",
            limit, kFirstStepLimitS);
    if (m_timeout_s > 0) return fmt::format("the limit: {:.0f} s, the run's --hang-timeout", limit);
    return fmt::format("the limit: {:.0f} s, {:.0f} times the slowest step so far (--hang-timeout S sets it)", limit,
                       kStepsPerLimit);
}

double HangWatch::limit_s() const {
    if (m_step == 0) return std::max(kFirstStepLimitS, m_timeout_s);
    if (m_timeout_s > 0) return m_timeout_s;
    return std::max(kMinLimitS, kStepsPerLimit * m_slowest_s);
}

}  // namespace us::app
