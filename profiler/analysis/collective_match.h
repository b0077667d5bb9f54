// The run's collectives matched across ranks, from the ranks' digests only (docs/blame.md). Ranks issue a process
// group instance's collectives in one order, so the k-th collective of an instance is one operation on each of its
// ranks. It cannot finish before the last of them has started it: the shortest of its parts is the transfer itself,
// the rank whose part that is arrived last, and every other rank spent the rest of its part waiting for it (the peer
// was still computing: load imbalance or skew, not the network). Matched once per run (cross_rank.h): who holds the
// run back (blame.h), the report's waits per group, the pipeline windows' embedding waits and the clocks read it.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "profiler/analysis/intervals.h"
#include "profiler/analysis/rank_digest.h"

namespace us::prof {

// One rank of a group instance: its collectives of the instance in issue order, as indices into its digest's.
struct InstanceMember {
    int rank = 0;
    size_t digest = 0;  // its index among the digests matched
    std::vector<uint32_t> parts;
};

// A process-group instance (DigestGroup::key, the same string on each of its ranks).
struct GroupInstance {
    std::string key;
    std::string name;                     // as the report names it (the first rank's)
    int group = 0;                        // its spans' group id (DigestGroup::id): a GroupKind for the engine's
    std::vector<InstanceMember> members;  // in rank order
};

// The k-th collective of an instance, matched across its members.
struct MatchedCollective {
    uint32_t instance = 0;  // into CollectiveMatches::instances
    uint32_t k = 0;
    uint32_t last = 0;        // the member that arrived last: its part was the shortest (the first such in rank order)
    int64_t transfer_ns = 0;  // that shortest part
};

// Indices into the digests they were matched from, which they read with.
struct CollectiveMatches {
    std::vector<GroupInstance> instances;  // by key
    // By instance, then k, of the instances with two members or more: the collectives every member recorded (a
    // trace cut short matches what all its members hold).
    std::vector<MatchedCollective> collectives;

    const DigestCollective& part(const std::vector<RankDigest>& digests, const MatchedCollective& c,
                                 size_t member) const;
    // How long `member` waited in `c` for the last to arrive (0 for the last).
    int64_t wait_ns(const std::vector<RankDigest>& digests, const MatchedCollective& c, size_t member) const;
    // The step `c` belongs to: its first member's part's (the same on every rank).
    int step(const std::vector<RankDigest>& digests, const MatchedCollective& c) const;
};

CollectiveMatches match_collectives(const std::vector<RankDigest>& digests);

// The first step every rank counts as steady (the latest of their first steady steps), or 0 without steps.
int first_steady_step(const std::vector<RankDigest>& digests);

// How long a rank waited inside collectives for their last rank, in seconds over the collectives of steps >=
// first_step: by group (GroupKind order, by the instances' group ids) and in all groups (an imported group without
// a kind counts there only). A wait is the first `wait` of its part, as in wait_intervals: collectives outstanding
// at once (buckets issued together, then waited for) wait through the same time, so their waits are merged, never
// summed, and a rank's waiting is never more than the time its collectives were outstanding.
struct RankWaits {
    std::array<double, kGroupCount> by_group{};
    double all_s = 0;
};
std::map<int, RankWaits> steady_waits(const CollectiveMatches& m, const std::vector<RankDigest>& digests,
                                      int first_step);

// rank -> when it waited inside the collectives of group `group` over the whole run: the first `wait` of each of its
// parts, since a rank that arrives early waits before the transfer can begin; merged (intervals.h).
std::map<int, std::vector<Interval>> wait_intervals(const CollectiveMatches& m, const std::vector<RankDigest>& digests,
                                                    int group);

}  // namespace us::prof
