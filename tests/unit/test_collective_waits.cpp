// How long ranks wait inside collectives for their group's last rank (profiler/analysis/collective_match.h), on
// hand-built digests: buckets issued one after another and waited for together wait through the same time, so a
// rank's waiting is their waits merged, never their sum, and never more than the time they were outstanding.
#include <catch2/catch.hpp>

#include "profiler/analysis/collective_match.h"
#include "profiler/analysis/cross_rank.h"
#include "profiler/analysis/rank_digest.h"

using namespace us::prof;

namespace {

constexpr int64_t kMs = 1'000'000;

// Two data-parallel ranks, steps 1..3 of 1,000 ms. In each step a rank issues three bucket all-reduces at
// issue[r] (ms from the step's start) and every bucket completes at 900 ms.
std::vector<RankDigest> buckets_waited_together(const std::vector<std::vector<int64_t>>& issue) {
    std::vector<RankDigest> out;
    for (size_t r = 0; r < issue.size(); ++r) {
        RankDigest d;
        d.rank = int(r), d.label = "rank " + std::to_string(r), d.source = "engine", d.world_size = int(issue.size());
        d.groups.push_back({"dp|0", "dp", {}, int(GroupKind::dp)});
        for (int step = 1; step <= 3; ++step) {
            const int64_t start = (step - 1) * 1000 * kMs;
            DigestStep s;
            s.step = step, s.begin = start, s.end = start + 1000 * kMs, s.wall_s = 1.0;
            d.steps.push_back(s);
            for (size_t b = 0; b < issue[r].size(); ++b) {
                DigestCollective c;
                c.group = 0, c.index = int(d.collectives.size()), c.op = OpClass::all_reduce, c.step = step;
                c.phase = Phase::backward, c.bytes = 1 << 20;
                c.begin = start + issue[r][b] * kMs, c.end = start + 900 * kMs;
                d.collectives.push_back(c);
            }
        }
        out.push_back(std::move(d));
    }
    return out;
}

}  // namespace

TEST_CASE("a rank's waits in buckets outstanding at once are merged: never more than their outstanding time", "[cpu]") {
    // Rank 0 issues its buckets at 100, 200, 300 ms, rank 1 at 600, 700, 800: rank 1 arrives last in each. Rank 0's
    // parts are 800, 700, 600 ms; the transfers (rank 1's parts) 300, 200, 100 ms; so it waits 500 ms in each,
    // [100, 600], [200, 700], [300, 800]: 1,500 ms summed, but 700 ms of time, inside the 800 ms its buckets were
    // outstanding.
    const std::vector<RankDigest> digests = buckets_waited_together({{100, 200, 300}, {600, 700, 800}});
    const CollectiveMatches m = match_collectives(digests);
    REQUIRE(m.collectives.size() == 9);
    const std::map<int, RankWaits> all = steady_waits(m, digests, 1);
    CHECK(all.at(0).by_group[size_t(GroupKind::dp)] == Approx(3 * 0.7));
    CHECK(all.at(0).all_s == Approx(3 * 0.7));
    CHECK(all.at(1).all_s == 0);
    // From step 2 on (the steady steps): two steps' worth.
    const std::map<int, RankWaits> steady = steady_waits(m, digests, 2);
    CHECK(steady.at(0).by_group[size_t(GroupKind::dp)] == Approx(2 * 0.7));
    CHECK(steady.at(0).by_group[size_t(GroupKind::tp)] == 0);
}

TEST_CASE("the cross-rank facts give each rank its waits, and zeros for a rank they do not hold", "[cpu]") {
    const CrossRank x = cross_rank(buckets_waited_together({{100, 200, 300}, {600, 700, 800}}));
    const double steps = double(3 - x.first_steady_step + 1);
    CHECK(x.waits_of(0).all_s / steps == Approx(0.7));
    CHECK(x.group_waits_of(0)[size_t(GroupKind::dp)] / steps == Approx(0.7));
    CHECK(x.waits_of(1).all_s == 0);
    CHECK(x.waits_of(7).all_s == 0);
}

TEST_CASE("blame counts the waiting a rank caused in buckets outstanding at once as time and not as their sum",
          "[cpu]") {
    const CrossRank x = cross_rank(buckets_waited_together({{100, 200, 300}, {600, 700, 800}}));
    const double steps = double(3 - x.first_steady_step + 1);
    const Blame& b = x.blame;
    REQUIRE(!b.stragglers.empty());
    CHECK(b.stragglers.front().rank == 1);
    CHECK(b.stragglers.front().others_waited_s / steps == Approx(0.7));  // 1.5 s a step if summed
    CHECK(b.waited_s / steps == Approx(0.7));
    CHECK(b.stragglers.front().share == Approx(1.0));
    for (const RankStepWait& c : b.waits)
        if (c.rank == 0)
            CHECK(c.suffered_s == Approx(0.7));
        else
            CHECK(c.caused_s == Approx(0.7));
}
