// The predicted steps beside the measured ones (run_diff.h): B without its straggler's waits, B with A's compute
// per kind. Each a first-order model that takes the figure away from B's mean step as if nothing else moved; the
// diff labels them predicted.
#include <fmt/format.h>

#include <algorithm>

#include "profiler/diff/run_diff.h"

namespace us::prof {

std::vector<WhatIf> what_if(const RunFigures& a, const RunFigures& b, const Blame& b_blame) {
    std::vector<WhatIf> out;
    if (!b_blame.stragglers.empty() && b.ranks.size() > 1 && b.steady_steps > 0) {
        const Straggler& s = b_blame.stragglers.front();
        // What it made each other rank wait, per steady step: its victims' waits (as time, wait_time.h) over the
        // victims and the steps, no more than all the waiting the ranks did in the steady steps.
        const double victims = double(b.ranks.size() - 1);
        // A wait lengthens the step only where no compute runs under it: never more than the exposed time.
        const double caused = std::min({s.others_waited_s / double(b.steady_steps) / victims,
                                        b.mean.waits_s * double(b.ranks.size()) / victims, b.mean.exposed_s});
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
