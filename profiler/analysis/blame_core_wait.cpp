// A straggler's waits for a core against its group's (blame_core_wait.h).
#include "profiler/analysis/blame_core_wait.h"

#include <fmt/format.h>

#include <algorithm>

#include "profiler/analysis/pipeline_blame.h"

namespace us::prof {

namespace {

// The median of the values; -1 where any is unknown or there are none.
double median_of_known(const std::vector<double>& v) {
    if (v.empty() || std::any_of(v.begin(), v.end(), [](double x) { return x < 0; })) return -1;
    return median(v);
}

// One kind of thread's wait: `wait` and `cpu` pick the trainer's or the workers' fields.
Straggler::CoreWait judge(const CoreTimes& own, const std::vector<CoreTimes>& others, double CoreTimes::*wait,
                          double CoreTimes::*cpu) {
    Straggler::CoreWait w;
    std::vector<double> waits, shares;
    for (const CoreTimes& o : others) waits.push_back(o.*wait), shares.push_back(waiting_share(o.*wait, o.*cpu));
    w.wait_s = own.*wait, w.group_median_wait_s = median_of_known(waits);
    w.share = waiting_share(own.*wait, own.*cpu), w.group_median_share = median_of_known(shares);
    if (w.wait_s < 0 || w.group_median_wait_s < 0) return w;
    if (w.share >= 0 && w.group_median_share >= 0 && w.group_median_share < 1)
        w.excess_s = w.wait_s - wait_at_share_s(own.*cpu, w.group_median_share);
    else if (w.share < 0 && w.group_median_share < 0)  // a trace from before the time on a core was recorded
        w.excess_s = w.wait_s - w.group_median_wait_s;
    return w;
}

// "waited for a core 85.7 ms a step (68% of its time ready to run), its group's other ranks' median 1.1 ms (3%)"
std::string wait_words(const char* who, const Straggler::CoreWait& w) {
    auto pct = [](double share) { return share >= 0 ? fmt::format(" ({:.0f}%)", 100 * share) : std::string(); };
    return fmt::format("{} waited for a core {:.1f} ms a step{}, its group's other ranks' median {:.1f} ms{}", who,
                       1e3 * w.wait_s,
                       w.share >= 0 ? fmt::format(" ({:.0f}% of its time ready to run)", 100 * w.share) : std::string(),
                       1e3 * w.group_median_wait_s, pct(w.group_median_share));
}

}  // namespace

void judge_core_waits(Straggler& s, const CoreTimes& own, const std::vector<CoreTimes>& others) {
    s.trainer_wait = judge(own, others, &CoreTimes::trainer_wait_s, &CoreTimes::trainer_cpu_s);
    s.workers_wait = judge(own, others, &CoreTimes::workers_wait_s, &CoreTimes::workers_cpu_s);
    if (!s.trainer_wait.excess_s || s.late_s <= 0) return;
    s.waited_for_core = *s.trainer_wait.excess_s >= 0.5 * s.late_s;
    if (!s.waited_for_core && s.workers_wait.excess_s)
        s.workers_may_have_waited = *s.trainer_wait.excess_s + *s.workers_wait.excess_s >= 0.5 * s.late_s;
}

nlohmann::json core_wait_json(const Straggler::CoreWait& w) {
    auto known = [](double v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(); };
    if (w.wait_s < 0) return nullptr;
    return {{"wait_s", w.wait_s},
            {"group_median_wait_s", known(w.group_median_wait_s)},
            {"share", known(w.share)},
            {"group_median_share", known(w.group_median_share)},
            {"excess_s", w.excess_s ? nlohmann::json(*w.excess_s) : nlohmann::json()}};
}

std::string core_wait_words(const Straggler& s) {
    const Straggler::CoreWait& t = s.trainer_wait;
    if (!t.excess_s) return "";
    const bool weighed = t.share >= 0;  // by the time on a core, or (older traces) the waits alone
    const std::string beyond =
        weighed ? fmt::format("beyond what its own time on a core would have waited at that share, {:.1f} ms",
                              1e3 * *t.excess_s)
                : fmt::format("{:.1f} ms more", 1e3 * *t.excess_s);
    if (s.waited_for_core)
        return fmt::format(
            "; {} (measured: the kernel's run queue); {}, at least half of the {:.1f} ms it came late: the machine's "
            "other load on its CPU held it (derived)",
            wait_words("its thread", t), beyond, 1e3 * s.late_s);
    if (!s.workers_wait.excess_s)  // one thread computes (or a trace from before the workers were recorded)
        return fmt::format("; {} (measured); {}: its trainer thread's wait does not account for it (derived)",
                           wait_words("its thread", t), beyond);
    const std::string workers = wait_words("its OpenMP workers", s.workers_wait) + ", summed over them";
    if (s.workers_may_have_waited)
        return fmt::format(
            "; {}; {} (measured: the kernel's run queue); beyond what their own times on a core would have waited at "
            "those shares, {:.1f} ms together, at least half of the {:.1f} ms it came late: the machine's other load "
            "on its CPUs may have held it (derived: a sum over threads is at most what they cost)",
            wait_words("its thread", t), workers, 1e3 * (*t.excess_s + *s.workers_wait.excess_s), 1e3 * s.late_s);
    return fmt::format("; {}; {} (measured): its threads' waits for a core do not account for it (derived)",
                       wait_words("its thread", t), workers);
}

}  // namespace us::prof
