// Who holds the run back (profiler/analysis/blame.h) on hand-built digests whose every wait is worked out below:
// a rank slow in every step is named, with the waiting it caused and the steps it was last in; noise that picks a
// different rank each step names no one and says which rule the most waited-for rank failed; one hiccup is not a
// culprit; every rank of one host slow names the node (one slow rank names the rank); the clocks are recovered from
// the collectives' ends; a digest survives its compact bytes.
#include <catch2/catch.hpp>
#include <cmath>

#include "common/core/check.h"
#include "profiler/analysis/blame.h"
#include "profiler/analysis/blame_node.h"
#include "profiler/analysis/rank_digest.h"

using namespace us::prof;

namespace {

constexpr int64_t kSecond = 1'000'000'000;

// `ranks` data-parallel ranks, steps 1..steps of 1 s each, one all-reduce a step that every rank enters when its
// compute is done (arrive[r][step-1], in s from the step's start) and leaves at 0.95 s. Rank r's clock reads
// offset[r] ns ahead of the run's.
std::vector<RankDigest> data_parallel(const std::vector<std::vector<double>>& arrive,
                                      const std::vector<int64_t>& offset = {}) {
    std::vector<RankDigest> out;
    for (size_t r = 0; r < arrive.size(); ++r) {
        RankDigest d;
        d.rank = int(r);
        d.label = "rank " + std::to_string(r);
        d.source = "engine";
        d.world_size = int(arrive.size());
        d.groups.push_back({"dp|0", "dp", {}});
        const int64_t shift = offset.empty() ? 0 : offset[r];
        for (size_t k = 0; k < arrive[r].size(); ++k) {
            const int step = int(k) + 1;
            const int64_t start = int64_t(k) * kSecond + shift;
            const int64_t in = start + int64_t(arrive[r][k] * 1e9), out_at = start + int64_t(0.95 * 1e9);
            DigestStep s;
            s.step = step, s.begin = start, s.end = start + kSecond;
            s.wall_s = 1.0, s.compute_s = arrive[r][k], s.comm_s = double(out_at - in) / 1e9;
            s.exposed_s = s.comm_s, s.idle_s = 1.0 - s.compute_s - s.comm_s;
            d.steps.push_back(s);
            DigestCollective c;
            c.group = 0, c.index = int(k), c.op = OpClass::all_reduce, c.step = step, c.phase = Phase::backward;
            c.bytes = 1 << 20, c.begin = in, c.end = out_at;
            d.collectives.push_back(c);
        }
        out.push_back(std::move(d));
    }
    return out;
}

}  // namespace

TEST_CASE("blame names the rank the others wait for in every step, with what they waited", "[cpu]") {
    // rank 2 computes 0.8 s a step, the others 0.5 s (a little jitter): from step 2 on (step 1 warms up), each of
    // the three others waits 0.3 s (+- jitter) a step for it, over 4 steps
    std::vector<std::vector<double>> arrive = {{0.50, 0.50, 0.51, 0.50, 0.52},
                                               {0.51, 0.52, 0.50, 0.50, 0.50},
                                               {0.80, 0.80, 0.80, 0.80, 0.80},
                                               {0.50, 0.51, 0.52, 0.51, 0.50}};
    const Blame b = blame(data_parallel(arrive));
    REQUIRE(b.culprit);
    REQUIRE(b.stragglers.size() == 1);
    const Straggler& s = b.stragglers.front();
    CHECK(s.rank == 2);
    CHECK(s.stands_out);
    CHECK(s.last_arrivals == 4);
    CHECK(s.collectives == 4);
    CHECK(s.steps_on_top == 4);
    CHECK(s.share == Approx(1.0));
    // the others' waits: steps 2..5 of ranks 0, 1, 3: sum of (0.8 - arrive)
    double expected = 0;
    for (int r : {0, 1, 3})
        for (size_t k = 1; k < 5; ++k) expected += 0.8 - arrive[size_t(r)][k];
    CHECK(s.others_waited_s == Approx(expected).epsilon(1e-6));
    CHECK(b.waited_s == Approx(expected).epsilon(1e-6));
    CHECK(s.compute_vs_median == Approx(0.8 / 0.5075).epsilon(1e-6));  // the others' median: rank 0's mean
    CHECK(s.phases.at("backward") == 4);
    CHECK(s.steps.size() == 4);
    CHECK(b.verdict.find("rank 2 holds the run back") == 0);
    CHECK(format_blame(b).find("<- holds the run back") != std::string::npos);
    const nlohmann::json j = blame_json(b);
    CHECK(j["culprit"] == true);
    CHECK(j["source"] == "measured");
    CHECK(j["stragglers"][0]["rank"] == 2);
    CHECK(j["why_not"].is_null());
    // the timeline's arrows: one per wait, each from a waiting rank to rank 2, in the waiter's begin order
    REQUIRE(b.edges.size() == 12);
    double edges_s = 0;
    for (size_t i = 0; i < b.edges.size(); ++i) {
        CHECK(b.edges[i].culprit == 2);
        CHECK(b.edges[i].waiter != 2);
        CHECK(b.edges[i].culprit_begin_ns > b.edges[i].waiter_begin_ns);  // it arrived last
        if (i) CHECK(b.edges[i].waiter_begin_ns >= b.edges[i - 1].waiter_begin_ns);
        edges_s += double(b.edges[i].wait_ns) / 1e9;
    }
    CHECK(edges_s == Approx(expected).epsilon(1e-6));
}

TEST_CASE("blame says whether the machine's other load held the straggler: its wait for a core against its group's",
          "[cpu]") {
    // rank 2 arrives 0.3 s after the others each step (the case above): it comes 0.3 s late (+- jitter)
    const std::vector<std::vector<double>> arrive = {{0.50, 0.50, 0.51, 0.50, 0.52},
                                                     {0.51, 0.52, 0.50, 0.50, 0.50},
                                                     {0.80, 0.80, 0.80, 0.80, 0.80},
                                                     {0.50, 0.51, 0.52, 0.51, 0.50}};
    // every step of rank 2 gets `slow`, the others' `others` (-1: not recorded)
    auto with_times = [&](CoreTimes slow, CoreTimes others) {
        std::vector<RankDigest> digests = data_parallel(arrive);
        for (RankDigest& d : digests)
            for (DigestStep& s : d.steps) {
                const CoreTimes& t = d.rank == 2 ? slow : others;
                s.core_wait_s = t.trainer_wait_s, s.core_cpu_s = t.trainer_cpu_s;
                s.worker_core_wait_s = t.workers_wait_s, s.worker_cpu_s = t.workers_cpu_s;
            }
        return digests;
    };
    auto with_waits = [&](double slow_rank_wait, double others_wait) {  // a trace with the trainer's waits alone
        return with_times({slow_rank_wait, -1, -1, -1}, {others_wait, -1, -1, -1});
    };
    SECTION("it waited for a core for most of the time it came late: the machine's other load") {
        const Blame b = blame(with_waits(0.25, 0.01));
        REQUIRE(b.culprit);
        const Straggler& s = b.stragglers.front();
        CHECK(s.late_s == Approx(0.2925).epsilon(0.01));  // the others' waits, 3.51 s over 4 steps and 3 ranks
        CHECK(s.trainer_wait.wait_s == Approx(0.25));
        CHECK(s.trainer_wait.group_median_wait_s == Approx(0.01));
        CHECK(s.trainer_wait.share == -1);  // no time on a core recorded: the waits alone
        CHECK(*s.trainer_wait.excess_s == Approx(0.24));
        CHECK(s.waited_for_core);
        CHECK(b.verdict.find("its thread waited for a core 250.0 ms a step, its group's other ranks' median 10.0 ms "
                             "(measured: the kernel's run queue); 240.0 ms more, at least half of the 292.5 ms") !=
              std::string::npos);
        CHECK(b.verdict.find("the machine's other load on its CPU held it") != std::string::npos);
        CHECK(blame_json(b)["stragglers"][0]["waited_for_core"] == true);
        CHECK(blame_json(b)["stragglers"][0]["core_wait"]["excess_s"].get<double>() == Approx(0.24));
    }
    SECTION("weighed by the time on a core: more work waits longer at the same share, and is not the load") {
        // 3x the work at the group's share of waiting (25% of the time ready to run): 0.3 s of wait against the
        // others' 0.1 s, 0.2 s more, which the waits alone would call the load; at the group's share its own 0.9 s
        // on a core would have waited 0.3 s: no excess
        const Blame b = blame(with_times({0.3, 0.9, -1, -1}, {0.1, 0.3, -1, -1}));
        REQUIRE(b.culprit);
        const Straggler& s = b.stragglers.front();
        CHECK(s.trainer_wait.share == Approx(0.25));
        CHECK(s.trainer_wait.group_median_share == Approx(0.25));
        CHECK(*s.trainer_wait.excess_s == Approx(0.0).margin(1e-12));
        CHECK_FALSE(s.waited_for_core);
        CHECK(b.verdict.find("(25% of its time ready to run), its group's other ranks' median 100.0 ms (25%)") !=
              std::string::npos);
        CHECK(b.verdict.find("its trainer thread's wait does not account for it") != std::string::npos);
    }
    SECTION("weighed by the time on a core: the same work, half its ready time waiting, is the load") {
        const Blame b = blame(with_times({0.3, 0.3, -1, -1}, {0.01, 0.3, -1, -1}));
        const Straggler& s = b.stragglers.front();
        CHECK(s.trainer_wait.share == Approx(0.5));
        CHECK(*s.trainer_wait.excess_s == Approx(0.29));  // at the group's 1/31 share, 0.3 s on a core waits 0.01 s
        CHECK(s.waited_for_core);
        CHECK(b.verdict.find("beyond what its own time on a core would have waited at that share, 290.0 ms") !=
              std::string::npos);
    }
    SECTION("it waited no longer than the others: its lateness is not the machine's other load") {
        const Blame b = blame(with_waits(0.02, 0.01));
        REQUIRE(b.culprit);
        CHECK_FALSE(b.stragglers.front().waited_for_core);
        CHECK(b.verdict.find("its trainer thread's wait does not account for it") != std::string::npos);
    }
    SECTION("its OpenMP workers waited too: with theirs, at least half: the load may have held it") {
        const Blame b = blame(with_times({0.02, 0.3, 0.40, 0.30}, {0.01, 0.3, 0.05, 0.30}));
        REQUIRE(b.culprit);
        const Straggler& s = b.stragglers.front();
        CHECK_FALSE(s.waited_for_core);  // its trainer's excess alone is 0.01 s of 0.29 s late
        CHECK(s.workers_wait.wait_s == Approx(0.40));
        CHECK(s.workers_wait.group_median_wait_s == Approx(0.05));
        // at the others' share (1/7), its workers' 0.3 s on a core would have waited 0.05 s
        CHECK(*s.workers_wait.excess_s == Approx(0.35));
        CHECK(s.workers_may_have_waited);
        CHECK(b.verdict.find("its OpenMP workers waited for a core 400.0 ms a step (57% of its time ready to run), "
                             "its group's other ranks' median 50.0 ms (14%), summed over them") != std::string::npos);
        CHECK(b.verdict.find("the machine's other load on its CPUs may have held it") != std::string::npos);
        CHECK(blame_json(b)["stragglers"][0]["workers_may_have_waited_for_core"] == true);
        CHECK(blame_json(b)["stragglers"][0]["workers_core_wait"]["group_median_wait_s"].get<double>() == Approx(0.05));
    }
    SECTION("its OpenMP workers waited about as long for their work as the others': the waits do not account for it") {
        const Blame b = blame(with_times({0.02, 0.3, 0.10, 0.60}, {0.01, 0.3, 0.05, 0.30}));  // 2x work, same share
        CHECK_FALSE(b.stragglers.front().workers_may_have_waited);
        CHECK(b.verdict.find("its threads' waits for a core do not account for it") != std::string::npos);
    }
    SECTION("a wait under half of how late it came is not the reason") {
        const Blame b = blame(with_waits(0.13, 0.01));  // 0.12 s over the median, against 0.29 s late
        CHECK_FALSE(b.stragglers.front().waited_for_core);
    }
    SECTION("unknown where a rank's trace lacks the counter: nothing said") {
        std::vector<RankDigest> digests = with_waits(0.25, 0.01);
        digests[0].steps[3].core_wait_s = -1;
        const Blame b = blame(digests);
        CHECK(b.stragglers.front().trainer_wait.group_median_wait_s < 0);
        CHECK_FALSE(b.stragglers.front().trainer_wait.excess_s);
        CHECK_FALSE(b.stragglers.front().waited_for_core);
        CHECK(b.verdict.find("for a core") == std::string::npos);
        CHECK(blame_json(b)["stragglers"][0]["core_wait"]["group_median_wait_s"].is_null());
    }
}

TEST_CASE("blame: a straggler's lateness is the waiting it caused in one group, over that group's other ranks",
          "[cpu]") {
    // tp 2 x dp 2: tp groups {0, 1} and {2, 3}, dp groups {0, 2} and {1, 3}. Each step a tp all-reduce, then a dp
    // one; rank 3 enters both 0.3 s after the others, so rank 2 waits 0.3 s for it in tp and rank 1 0.3 s in dp:
    // 0.6 s of waiting a step in all, but each group's other rank waited 0.3 s.
    std::vector<RankDigest> digests;
    for (int r = 0; r < 4; ++r) {
        RankDigest d;
        d.rank = r, d.label = "rank " + std::to_string(r), d.source = "engine", d.world_size = 4;
        d.groups.push_back({"tp|" + std::to_string(r / 2), "tp", {}, int(GroupKind::tp)});
        d.groups.push_back({"dp|" + std::to_string(r % 2), "dp", {}, int(GroupKind::dp)});
        const double late = r == 3 ? 0.3 : 0.0;
        for (int k = 0; k < 5; ++k) {
            const int64_t start = int64_t(k) * kSecond;
            DigestStep s;
            s.step = k + 1, s.begin = start, s.end = start + kSecond, s.wall_s = 1.0, s.compute_s = 0.2 + late;
            d.steps.push_back(s);
            for (int g = 0; g < 2; ++g) {
                DigestCollective c;
                c.group = g, c.index = k, c.op = OpClass::all_reduce, c.step = k + 1;
                c.phase = g == 0 ? Phase::forward : Phase::backward, c.bytes = 1 << 20;
                c.begin = start + int64_t((0.1 + 0.5 * g + late) * 1e9),
                c.end = start + int64_t((0.45 + 0.5 * g) * 1e9);
                d.collectives.push_back(c);
            }
        }
        digests.push_back(std::move(d));
    }
    const Blame b = blame(digests);
    REQUIRE_FALSE(b.stragglers.empty());
    const Straggler& s = b.stragglers.front();
    CHECK(s.rank == 3);
    CHECK(s.others_waited_s == Approx(4 * 0.6).epsilon(1e-6));  // steps 2-5, both groups
    CHECK(s.late_s == Approx(0.3).epsilon(1e-6));               // one group's, over its one other rank
}

TEST_CASE("blame names no one when noise picks a different rank each step, and says which rule failed", "[cpu]") {
    // each step a different rank is 20 ms late: every rank is last once, the waits are 2% of a step
    std::vector<std::vector<double>> arrive = {
        {0.5, 0.52, 0.5, 0.5, 0.5}, {0.5, 0.5, 0.52, 0.5, 0.5}, {0.5, 0.5, 0.5, 0.52, 0.5}, {0.5, 0.5, 0.5, 0.5, 0.52}};
    const Blame b = blame(data_parallel(arrive));
    CHECK_FALSE(b.culprit);
    CHECK(b.collectives_matched == 4);
    CHECK(b.stragglers.size() == 4);
    for (const Straggler& s : b.stragglers) CHECK_FALSE(s.stands_out);
    CHECK(b.verdict.find("nothing stands out") == 0);
    CHECK_FALSE(b.why_not.empty());
    CHECK(b.verdict.find(b.why_not) != std::string::npos);
}

TEST_CASE("blame does not name a rank for one hiccup, however long", "[cpu]") {
    // rank 1 stalls 0.4 s in step 3 alone: most of the waiting, far more than anyone else, but in one step
    std::vector<std::vector<double>> arrive = {
        {0.5, 0.5, 0.5, 0.51, 0.5}, {0.5, 0.5, 0.9, 0.5, 0.5}, {0.5, 0.51, 0.5, 0.5, 0.5}, {0.5, 0.5, 0.5, 0.5, 0.51}};
    const Blame b = blame(data_parallel(arrive));
    CHECK_FALSE(b.culprit);
    REQUIRE_FALSE(b.stragglers.empty());
    CHECK(b.stragglers.front().rank == 1);
    CHECK(b.stragglers.front().share > 0.9);
    CHECK(b.stragglers.front().steps_on_top == 1);
    CHECK(b.why_not.find("in 1 of 4 steps") != std::string::npos);
}

// 8 data-parallel ranks on two hosts, gpu-a (ranks 0-3) and gpu-b (ranks 4-7), over 5 steps; `slow` ranks compute
// 0.8 s a step and the others 0.5 s, and in each step a different one of the slow ranks is 10 ms later still (they
// take turns arriving last, as equally slow ranks do).
std::vector<RankDigest> two_hosts(const std::vector<int>& slow, bool hosts_known = true) {
    std::vector<std::vector<double>> arrive(8, std::vector<double>(5, 0.5));
    for (size_t i = 0; i < slow.size(); ++i)
        for (size_t k = 0; k < 5; ++k) arrive[size_t(slow[i])][k] = 0.8 + (k % slow.size() == i ? 0.01 : 0.0);
    std::vector<RankDigest> out = data_parallel(arrive);
    for (RankDigest& d : out) d.host = hosts_known ? (d.rank < 4 ? "gpu-a" : "gpu-b") : "";
    return out;
}

TEST_CASE("blame names the node when every rank of one host holds the run back, and a rank when one does", "[cpu]") {
    // every rank of gpu-b is slow: each is last in one of the 4 steady steps, so none stands out alone
    const Blame b = blame(two_hosts({4, 5, 6, 7}));
    REQUIRE(b.node);
    CHECK(b.culprit);
    CHECK(b.node->host == "gpu-b");
    CHECK(b.node->ranks == std::vector<int>{4, 5, 6, 7});
    CHECK(b.node->share == Approx(1.0));
    CHECK(b.node->steps_on_top == 4);
    CHECK(b.node->steps_with_waiting == 4);
    // each slow rank computes 0.8025 s a steady step; its group's other ranks are 3 slow and 4 fast: their median
    // is a fast one's 0.5 s
    CHECK(b.node->compute_vs_median == Approx(0.8025 / 0.5).epsilon(1e-3));
    CHECK(b.verdict.find("node gpu-b (ranks 4-7) holds the run back") == 0);
    CHECK(b.why_not.empty());
    REQUIRE(b.stragglers.size() == 4);
    for (const Straggler& s : b.stragglers) CHECK(s.stands_out);
    nlohmann::json j = blame_json(b);
    CHECK(j["node"] == "gpu-b");
    CHECK(j["culprit"] == true);
    CHECK(b.node->core_wait_s < 0);  // no rank recorded its wait for a core
    CHECK(b.verdict.find("for a core") == std::string::npos);
    // gpu-b's ranks waited for a core 0.2 s a step, the others 0.01 s: the machine's other load on the node. Each
    // step gpu-a's ranks (at 0.5 s) wait 0.31 s for gpu-b's last (at 0.81 s): the node came 0.31 s late for them.
    auto loaded = two_hosts({4, 5, 6, 7});
    for (RankDigest& d : loaded)
        for (DigestStep& s : d.steps) s.core_wait_s = d.host == "gpu-b" ? 0.2 : 0.01;
    const Blame held = blame(loaded);
    REQUIRE(held.node);
    CHECK(held.node->late_s == Approx(0.31));
    CHECK(held.node->waited_for_core);
    CHECK(held.verdict.find("the machine's other load on the node held them") != std::string::npos);
    CHECK(blame_json(held)["node_core_wait"]["waited_for_core"] == true);
    CHECK(blame_json(held)["node_core_wait"]["others_core_wait_s"].get<double>() == Approx(0.01));
    CHECK(blame_json(b)["node_core_wait"].is_null());
    for (RankDigest& d : loaded)
        for (DigestStep& s : d.steps) s.core_wait_s = 0.01;
    CHECK(blame(loaded).verdict.find("their trainer threads' wait does not account for it") != std::string::npos);
    // an excess of 0.1 s is under half of the 0.31 s they came late: not the load
    for (RankDigest& d : loaded)
        for (DigestStep& s : d.steps) s.core_wait_s = d.host == "gpu-b" ? 0.11 : 0.01;
    CHECK_FALSE(blame(loaded).node->waited_for_core);
    // weighed by the time on a core: 3x the work at the others' share (25%) is not the load, though its bare wait is
    // 0.2 s more (at least half of 0.31 s); half its ready time waiting against the others' 3% is
    auto with_times = [&](double b_wait, double b_cpu, double a_wait, double a_cpu) {
        for (RankDigest& d : loaded)
            for (DigestStep& s : d.steps) {
                const bool on_b = d.host == "gpu-b";
                s.core_wait_s = on_b ? b_wait : a_wait, s.core_cpu_s = on_b ? b_cpu : a_cpu;
            }
        return blame(loaded);
    };
    const Blame work = with_times(0.3, 0.9, 0.1, 0.3);
    REQUIRE(work.node);
    CHECK(work.node->wait_share == Approx(0.25));
    CHECK(*work.node->excess_s == Approx(0.0).margin(1e-12));
    CHECK_FALSE(work.node->waited_for_core);
    CHECK(work.verdict.find("their threads waited for a core 300.0 ms a step (25%), the other ranks' 100.0 ms (25%)") !=
          std::string::npos);
    const Blame load = with_times(0.3, 0.3, 0.01, 0.3);
    REQUIRE(load.node);
    CHECK(*load.node->excess_s == Approx(0.29));
    CHECK(load.node->waited_for_core);
    CHECK(load.verdict.find("beyond what their own time on a core would have waited at that share, 290.0 ms") !=
          std::string::npos);
    CHECK(blame_json(load)["node_core_wait"]["excess_s"].get<double>() == Approx(0.29));
    CHECK(blame_json(load)["node_core_wait"]["others_share"].get<double>() == Approx(0.01 / 0.31));
    // one slow rank on gpu-b: the rank is named, not its node
    const Blame one = blame(two_hosts({5}));
    CHECK(one.culprit);
    CHECK_FALSE(one.node);
    CHECK(one.verdict.find("rank 5 holds the run back") == 0);
    CHECK(blame_json(one)["node"].is_null());
    // two of gpu-b's four ranks: not the node (and neither rank alone)
    const Blame some = blame(two_hosts({4, 5}));
    CHECK_FALSE(some.node);
    // the hosts unrecorded: no node, and nothing stands out, as before
    const Blame unknown = blame(two_hosts({4, 5, 6, 7}, false));
    CHECK_FALSE(unknown.node);
    CHECK_FALSE(unknown.culprit);
    CHECK(unknown.verdict.find("nothing stands out") == 0);
    // every rank on one host: the node would be the whole run
    auto one_host = two_hosts({4, 5, 6, 7});
    for (RankDigest& d : one_host) d.host = "gpu-a";
    CHECK_FALSE(blame(one_host).node);
    CHECK(rank_ranges({0, 2, 5, 6, 7}) == "ranks 0, 2, 5-7");
    CHECK(rank_ranges({3}) == "rank 3");
}

TEST_CASE("blame recovers the ranks' clock offsets from the collectives' ends", "[cpu]") {
    std::vector<std::vector<double>> arrive = {{0.5, 0.5, 0.5, 0.5}, {0.6, 0.6, 0.6, 0.6}, {0.55, 0.5, 0.5, 0.52}};
    const std::vector<int64_t> offset = {0, 3'000'000, -7'500'000};
    const Blame b = blame(data_parallel(arrive, offset));
    REQUIRE(b.clocks.size() == 3);
    for (size_t r = 0; r < 3; ++r) {
        const RankClock& c = b.clocks[r];
        CHECK(c.method.rfind("collectives", 0) == 0);
        REQUIRE(c.offset_ns);
        CHECK(*c.offset_ns == offset[r] - offset[0]);
        REQUIRE(c.uncertainty_ns);
        CHECK(*c.uncertainty_ns == 0);
    }
    // a trace's own offsets are taken as they are
    auto given = data_parallel(arrive, offset);
    for (RankDigest& d : given) d.clock_offset_ns = offset[size_t(d.rank)], d.clock_uncertainty_ns = 1000;
    const Blame g = blame(given);
    CHECK(g.clocks[2].method == "the trace's");
    CHECK(*g.clocks[2].offset_ns == offset[2]);
}

TEST_CASE("blame on one rank, or ranks without collectives, says so", "[cpu]") {
    const Blame one = blame(data_parallel({{0.5, 0.5, 0.5}}));
    CHECK_FALSE(one.culprit);
    CHECK(one.collectives_matched == 0);
    CHECK(one.verdict.find("no collective was matched") == 0);
    CHECK(blame({}).verdict == "no ranks");
}

TEST_CASE("a digest survives its JSON and its compact bytes, and bad bytes are a clear error", "[cpu]") {
    auto digests = data_parallel({{0.5, 0.6, 0.7}, {0.55, 0.65, 0.75}});
    RankDigest& d = digests[1];
    d.coords = {.dp = 1, .pp = 0};
    d.host = "gpu-b";
    d.clock_offset_ns = 42, d.clock_uncertainty_ns = 7;
    d.steps[1].core_wait_s = 0.125;
    d.steps[1].worker_core_wait_s = 0.5;
    d.steps[1].core_cpu_s = 0.25, d.steps[1].worker_cpu_s = 0.75;
    d.ops.push_back({"matmul", OpClass::gemm, 12, 0.25});
    DigestTransfer t;
    t.peer = 0, t.send = true, t.index = 0, t.step = 2, t.phase = Phase::forward, t.bytes = 4096, t.begin = 5,
    t.end = 9;
    d.transfers.push_back(t);
    HtaFigures f;
    f.kernel_time_us = 10, f.idle_time_us = 2, f.comp_comm_overlap_pct = 33.0, f.kernels = 5;
    d.hta = f;
    const nlohmann::json j = digest_json(d);
    CHECK(digest_json(digest_from_json(j)) == j);
    CHECK(digest_from_json(j).host == "gpu-b");
    CHECK(digest_from_json(j).steps[1].core_wait_s == 0.125);
    CHECK(digest_from_json(j).steps[0].core_wait_s == -1);
    CHECK(digest_from_json(j).steps[1].worker_core_wait_s == 0.5);
    CHECK(digest_from_json(j).steps[0].worker_core_wait_s == -1);
    CHECK(digest_from_json(j).steps[1].core_cpu_s == 0.25);
    CHECK(digest_from_json(j).steps[1].worker_cpu_s == 0.75);
    const std::string bytes = digest_bytes(d);
    CHECK(digest_json(digest_from_bytes(bytes, "rank 1's digest")) == j);
    CHECK(bytes.size() < j.dump().size());
    try {
        digest_from_bytes("not a digest", "cache/rank-1.digest");
        FAIL("bad bytes read");
    } catch (const us::UserError& e) {
        CHECK(std::string(e.what()).find("cache/rank-1.digest") != std::string::npos);
    }
    nlohmann::json wrong = j;
    wrong["version"] = 999;
    CHECK_THROWS_AS(digest_from_json(wrong), us::UserError);
}
