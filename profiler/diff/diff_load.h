// Whether the machine's load, not what changed, explains a diff: each run's wait for a core (the kernel's run
// queue, docs/blame.md). A run slower because another process took its cores is the machine, and so is a run
// faster because the other had them taken: the verdict says so beside the causes, whose figures include it.
#pragma once

#include <optional>
#include <string>

#include "profiler/diff/run_diff.h"

namespace us::prof {

// How much longer B's most-waiting rank waited for a core a step than its time on a core would have at A's share of
// waiting (than A's most-waiting rank, where a trace lacks the time on a core), where that is at least half of B's
// slowdown (the machine's other load, not what changed); nullopt otherwise.
std::optional<double> load_explains_ms(const RunDiff& d);
// Whether load_explains_ms weighs by the time on a core (both runs recorded it).
bool load_weighed(const RunDiff& d);
// The same the other way: how much longer A's most-waiting rank waited for a core a step than B's, where B is
// faster and that is at least half of B's speed-up (B may be faster because A's cores were taken); nullopt otherwise.
std::optional<double> a_load_explains_ms(const RunDiff& d);

// The verdict's clause on the machine's load ("; B's rank 1 waited 234.41 ms a step longer for a core ..."), or "".
std::string load_clause(const RunDiff& d);

}  // namespace us::prof
