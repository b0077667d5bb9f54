// The what-if steps beside the measured ones (run_diff.h): B without its straggler's waits, B with A's compute
// per kind. Each a first-order model that takes the figure away from B's mean step as if nothing else moved; the
// diff labels them derived (a first-order estimate from measured figures; "predicted" is the engine's exact walk).
#include <fmt/format.h>

#include <algorithm>

#include "profiler/diff/run_diff.h"

namespace us::prof {

std::vector<WhatIf> what_if(const RunFigures& a, const RunFigures& b, const Blame& b_blame) {
    std::vector<WhatIf> out;
    if (names_straggler(b_blame) && b.ranks.size() > 1 && b.steady_steps > 0) {
        const Straggler& s = b_blame.stragglers.front();
        // What it made each other rank wait, per steady step: its victims' own waits, each no more than the victim's
        // exposed time (a wait lengthens the step only where no compute runs under it), averaged over the victims;
        // never more than the waits blame counted for it. The straggler's own figures stay out: it hardly waits.
        double victims_wait = 0;
        int victims = 0;
        for (const RankFigures& r : b.ranks)
            if (r.rank != s.rank) victims_wait += std::min(r.step.waits_s, r.step.exposed_s), ++victims;
        const double caused =
            std::min(victims_wait / double(victims), s.others_waited_s / double(b.steady_steps) / double(victims));
        out.push_back(
            {"without the straggler", 1e3 * (b.mean.wall_s - caused),
             fmt::format("B's step less the {:.2f} ms per step each other rank waited for {}", 1e3 * caused, s.label)});
    }
    double compute_delta = 0;
    for (size_t k = 0; k < a.mean.kind_self_s.size(); ++k)
        compute_delta += b.mean.kind_self_s[k] - a.mean.kind_self_s[k];
    out.push_back({"with A's kernels", 1e3 * (b.mean.wall_s - compute_delta),
                   fmt::format("B's step with each compute kind's op time at A's ({:+.2f} ms of compute taken back), "
                               "the compute on the step's critical path",
                               -1e3 * compute_delta)});
    return out;
}

}  // namespace us::prof
