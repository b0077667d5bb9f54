// Whether the machine's load explains a diff (diff_load.h).
#include "profiler/diff/diff_load.h"

#include <fmt/format.h>

#include "profiler/analysis/core_wait.h"

namespace us::prof {

namespace {

// Whose threads took a run's cores: its own ranks' turns where it gave a machine more threads than cores; else the
// machine's other load, or the run's own helper threads (an overlapped all-reduce's progress, the trace's writer):
// the run queue says that the trainer thread waited, not whose thread ran.
std::string load_words(const std::string& oversubscribed, char run) {
    return oversubscribed.empty()
               ? "another thread on its cores: the machine's other load, or the run's own helper threads"
               : fmt::format("in {} {}, besides the machine's other load", run, oversubscribed);
}

}  // namespace

bool load_weighed(const RunDiff& d) {
    return d.a_core_wait && d.b_core_wait && d.a_core_wait->share >= 0 && d.a_core_wait->share < 1 &&
           d.b_core_wait->most_cpu_ms >= 0;
}

std::optional<double> load_explains_ms(const RunDiff& d) {
    if (!d.a_core_wait || !d.b_core_wait || d.delta_ms <= 0) return std::nullopt;
    const RunDiff::CoreWait &a = *d.a_core_wait, &b = *d.b_core_wait;
    // More work waits longer on shared cores at the same share: where the times on a core are known, B's
    // most-waiting rank's wait beyond what its time on a core would have waited at A's share (docs/blame.md).
    const bool weighed = load_weighed(d);
    const double more = weighed ? b.most_ms - wait_at_share_s(b.most_cpu_ms, a.share) : b.most_ms - a.most_ms;
    if (more < 0.5 * d.delta_ms) return std::nullopt;
    return more;
}

std::optional<double> a_load_explains_ms(const RunDiff& d) {
    if (!d.a_core_wait || !d.b_core_wait || d.delta_ms >= 0) return std::nullopt;
    const double more = d.a_core_wait->most_ms - d.b_core_wait->most_ms;
    if (more < 0.5 * -d.delta_ms) return std::nullopt;
    return more;
}

std::string load_clause(const RunDiff& d) {
    if (const auto more = load_explains_ms(d))
        return load_weighed(d)
                   ? fmt::format(
                         "; B's rank {} waited {:.2f} ms a step longer for a core than its time on a core would have "
                         "at A's share of waiting ({:.0f}%) (derived from the kernel's run queue: {}, inside the "
                         "figures above)",
                         d.b_core_wait->most_rank, *more, 100 * d.a_core_wait->share,
                         load_words(d.b_oversubscribed, 'B'))
                   : fmt::format(
                         "; B's rank {} waited {:.2f} ms a step longer for a core than A's most (measured: {}, inside "
                         "the figures above)",
                         d.b_core_wait->most_rank, *more, load_words(d.b_oversubscribed, 'B'));
    if (const auto more = a_load_explains_ms(d))
        return fmt::format(
            "; A's rank {} waited {:.2f} ms a step longer for a core than B's most (measured: {}, inside the figures "
            "above): at least half of B's speed-up is A's wait for a core",
            d.a_core_wait->most_rank, *more, load_words(d.a_oversubscribed, 'A'));
    return "";
}

}  // namespace us::prof
