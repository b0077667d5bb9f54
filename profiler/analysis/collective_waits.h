// How long each rank waited inside its groups' collectives for the group's last rank to arrive. A collective
// cannot finish before every rank of its group has started it. Ranks issue a group's collectives in one order, so
// the k-th collective of a group is the same operation on each of its ranks: the shortest of its durations across
// the group is the transfer itself, and what a rank spent beyond that was waiting for a peer (the peer was still
// computing: load imbalance or skew, not the network). Summed per rank and group over the steady steps.
#pragma once

#include <array>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "profiler/analysis/intervals.h"
#include "profiler/event.h"
#include "profiler/trace/trace_store.h"
#include "profiler/transport/grid_coords.h"

namespace us::prof {

// The instance of the engine's group `group` a rank with grid coordinates `coords` belongs to, as a key: the ranks
// that share every coordinate but the group's own ("world" for the world group).
std::string engine_group_instance(const GridCoords& coords, int group);

// rank -> seconds waited per group (GroupKind order), over the spans of steps >= first_steady_step.
std::map<int, std::array<double, kGroupCount>> collective_waits(const TraceStore& store, int first_steady_step);

// rank -> when it waited inside the collectives of `group`: the first (duration - transfer) of each span, since a
// rank that arrives early waits before the transfer can begin. Merged (intervals.h), over the whole run.
std::map<int, std::vector<Interval>> collective_wait_intervals(const TraceStore& store, int group);

}  // namespace us::prof
