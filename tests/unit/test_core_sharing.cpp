// Which ranks share a machine's cores (profiler/analysis/core_sharing.h): CPU lists read from a trace are parsed or
// refused whole, ranks are grouped by the machine (the kernel's boot id), not the host name an emulated node has of
// its own, their threads summed against the union of their CPUs; the report, the pipeline bubble's misses and the
// diff then say the run's own ranks took turns where it gave a machine more threads than cores. The engine records
// the machine and the CPUs at a rank's start (engine/train/cpu_placement.h).
#include <catch2/catch.hpp>
#include <sched.h>

#include "engine/train/cpu_placement.h"
#include "profiler/analysis/core_sharing.h"
#include "profiler/analysis/cross_rank.h"
#include "profiler/diff/diff_load.h"
#include "profiler/diff/run_diff.h"
#include "test_util.h"

using namespace us::prof;

namespace {

RankDigest placed(int rank, const std::string& machine, const std::string& host, const std::string& cpus, int threads) {
    RankDigest d;
    d.rank = rank, d.label = "rank " + std::to_string(rank), d.source = "engine";
    d.machine = machine, d.host = host, d.cpus = cpus, d.threads = threads;
    return d;
}

}  // namespace

TEST_CASE("core sharing: a CPU list is read whole, or not at all", "[cpu]") {
    CHECK(parse_cpu_list("0-3,8") == std::vector<int>{0, 1, 2, 3, 8});
    CHECK(parse_cpu_list("5") == std::vector<int>{5});
    CHECK(parse_cpu_list("2-4,3,0") == std::vector<int>{0, 2, 3, 4});  // overlaps counted once
    for (const char* bad : {"", "3-1", "a", "0-", "-1", "1,,2", "0-3,x", "99999999", "1 ,2", "0-70000"}) {
        INFO(bad);
        CHECK(parse_cpu_list(bad).empty());
    }
}

TEST_CASE("core sharing: ranks group by machine, whatever their host names, threads against the union of CPUs",
          "[cpu]") {
    SECTION("two emulated nodes on one 2-core machine, a thread a rank: 4 threads on 2 cores") {
        const auto m = core_sharing({placed(0, "boot-a", "us1n0", "0-1", 1), placed(1, "boot-a", "us1n0", "0-1", 1),
                                     placed(2, "boot-a", "us1n1", "0-1", 1), placed(3, "boot-a", "us1n1", "0-1", 1)});
        REQUIRE(m.size() == 1);
        CHECK(m[0].ranks == std::vector<int>{0, 1, 2, 3});
        CHECK(m[0].hosts == std::vector<std::string>{"us1n0", "us1n1"});
        CHECK(m[0].threads == 4);
        CHECK(m[0].cores == 2);
        CHECK(m[0].oversubscribed());
        CHECK(oversubscribed_words(m) == "this run's own 4 compute threads share 2 cores (ranks 0-3)");
        CHECK(core_sharing_json(m)[0]["oversubscribed"] == true);
    }
    SECTION("two machines of 4 cores, two ranks of 2 threads on each: nothing oversubscribed") {
        const auto m = core_sharing({placed(0, "boot-a", "a", "0-3", 2), placed(1, "boot-a", "a", "0-3", 2),
                                     placed(2, "boot-b", "b", "0-3", 2), placed(3, "boot-b", "b", "0-3", 2)});
        REQUIRE(m.size() == 2);
        CHECK(m[1].ranks == std::vector<int>{2, 3});
        CHECK(m[1].threads == 4);
        CHECK(m[1].cores == 4);
        CHECK_FALSE(most_oversubscribed(m));
        CHECK(oversubscribed_words(m).empty());
    }
    SECTION("ranks bound to one CPU each count the CPUs together") {
        const auto m = core_sharing({placed(0, "boot-a", "a", "0", 1), placed(1, "boot-a", "a", "1", 1)});
        REQUIRE(m.size() == 1);
        CHECK(m[0].cores == 2);
        CHECK_FALSE(m[0].oversubscribed());
    }
    SECTION("the most oversubscribed machine is named; ranks not consecutive are listed") {
        const auto m = core_sharing({placed(0, "boot-a", "a", "0-1", 2), placed(1, "boot-b", "b", "0", 1),
                                     placed(2, "boot-a", "a", "0-1", 2), placed(3, "boot-b", "b", "0", 2)});
        REQUIRE(m.size() == 2);
        CHECK(oversubscribed_words(m) == "this run's own 3 compute threads share 1 core (ranks 1, 3)");
    }
    SECTION("a rank whose machine, CPUs or threads are unknown (a GPU rank, an older trace, a bad list) is left out") {
        const auto m = core_sharing({placed(0, "", "a", "0-1", 4), placed(1, "boot-a", "a", "0-1", 0),
                                     placed(2, "boot-a", "a", "x", 4), placed(3, "boot-a", "a", "0-1", 1)});
        REQUIRE(m.size() == 1);
        CHECK(m[0].ranks == std::vector<int>{3});
        CHECK_FALSE(m[0].oversubscribed());
    }
}

TEST_CASE("core sharing: this process's machine and CPUs as the engine records them", "[cpu]") {
    const std::string id = us::kernel_boot_id();
    if (id.empty()) return us::test::skip_test("this kernel gives no boot id (/proc/sys/kernel/random/boot_id)");
    CHECK(id.size() == 36);  // a UUID: the same for every process of this boot
    CHECK(us::kernel_boot_id() == id);
    cpu_set_t set;
    CPU_ZERO(&set);
    REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
    CHECK(int(parse_cpu_list(us::affinity_cpu_list()).size()) == CPU_COUNT(&set));
}

TEST_CASE("core sharing: the diff says B's waits for a core are its own ranks' turns where B oversubscribed",
          "[cpu][diff]") {
    // Two dp ranks a run; B's rank 1 computes 0.3 s more a step and waits 0.5 s for a core, A's ranks 2% of their
    // time ready to run. B puts 4 threads on 2 cores, A 2.
    auto run = [](double extra_s, double wait_s, int threads) {
        std::vector<RankDigest> ranks;
        for (int r = 0; r < 2; ++r) {
            RankDigest d = placed(r, "boot-a", "a", "0-1", threads);
            d.world_size = 2;
            d.groups.push_back({"dp|0", "dp", {}, int(GroupKind::dp)});
            for (int step = 1; step <= 4; ++step) {
                const double compute = 0.5 + (r == 1 ? extra_s : 0), wall = 0.5 + extra_s + 0.2;
                DigestStep s;
                s.step = step, s.begin = int64_t(step * 2e9), s.end = s.begin + int64_t(wall * 1e9);
                s.wall_s = wall, s.compute_s = compute, s.comm_s = wall - compute, s.exposed_s = s.comm_s;
                s.group_exposed_s[size_t(GroupKind::dp)] = s.exposed_s;
                s.core_wait_s = r == 1 ? wait_s : 0.01, s.core_cpu_s = r == 1 ? 0.49 + extra_s : 0.49;
                d.steps.push_back(s);
                DigestCollective c;
                c.group = 0, c.index = step - 1, c.op = OpClass::all_reduce, c.step = step;
                c.phase = Phase::backward, c.bytes = 1 << 20;
                c.begin = s.begin + int64_t(compute * 1e9), c.end = s.end;
                d.collectives.push_back(c);
            }
            d.kind_self_s[0] = 0.5 + (r == 1 ? extra_s : 0);
            d.ops.push_back({"gemm op", OpClass::gemm, 1, d.kind_self_s[0], ComputeKind::gemm});
            d.ops_complete = true;
            ranks.push_back(d);
        }
        return cross_rank(std::move(ranks));
    };
    const CrossRank a = run(0, 0.01, 1), b = run(0.3, 0.5, 2);
    REQUIRE(b.core_sharing.size() == 1);
    const RunDiff d = diff_runs({"A", &a, {}}, {"B", &b, {}});
    CHECK(d.a_oversubscribed.empty());
    CHECK(d.b_oversubscribed == "this run's own 4 compute threads share 2 cores (ranks 0-1)");
    REQUIRE(load_explains_ms(d));
    CHECK(d.verdict.find("in B this run's own 4 compute threads share 2 cores (ranks 0-1), besides the machine's "
                         "other load") != std::string::npos);
    CHECK(format_diff(d).find("cores: in B this run's own 4 compute threads") != std::string::npos);
    CHECK(diff_json(d)["a_oversubscribed"].is_null());
    CHECK(diff_json(d)["b_oversubscribed"] == d.b_oversubscribed);
}
