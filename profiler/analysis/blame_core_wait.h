// Its own work, or the machine's other load (docs/blame.md): a straggler's threads' waits for a core per steady step
// (core_wait.h, measured by the kernel) against its group's other ranks', and against how late it came. A rank with
// more work is ready to run longer, and on shared cores waits longer for the same share of them: the wait is weighed
// by the time on a core, as the share of its ready time spent waiting, and the excess is the wait beyond what its
// own time on a core would have waited at the group's median share. The trainer thread's excess alone reaching half
// of how late it came says the load held it; with its OpenMP workers' summed excess (an upper bound of what they
// cost: several can wait at once, or wait while idle) it says the load may have; else the waits do not account for
// it. Every wait and share is measured, the excess and the conclusion derived.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "profiler/analysis/blame.h"

namespace us::prof {

// Sets the straggler's trainer_wait, workers_wait and verdict flags from its own times (`own`) and its group's other
// ranks' (`others`); late_s must be set.
void judge_core_waits(Straggler& s, const CoreTimes& own, const std::vector<CoreTimes>& others);

// {"wait_s", "group_median_wait_s", "share", "group_median_share", "excess_s"}; null where the wait is unknown.
nlohmann::json core_wait_json(const Straggler::CoreWait& w);

// What the straggler's waits say, as the verdict's last clause ("; its thread waited ..."); "" where unknown.
std::string core_wait_words(const Straggler& s);

}  // namespace us::prof
