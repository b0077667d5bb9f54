// Blame on real PyTorch runs with a known culprit (tests/data/kineto/blame, recorded with torch on CPU over gloo by
// tests/tools/record_blame_traces.sh; each scenario's meta.json says what was slowed). Blame must name the slowed
// rank or the heavy stage where the recording shows it clearly, say nothing stands out where nothing was slowed,
// and never name a rank that was not slowed. The recordings' limits (two recorded steps, ranks oversubscribed on two
// cores) are in tests/data/kineto/blame/README.md.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "profiler/analysis/blame.h"
#include "profiler/runs/run_digests.h"
#include "test_util.h"

using namespace us::prof;
namespace fs = std::filesystem;

namespace {

struct Scenario {
    nlohmann::json meta;
    Blame blame;
};

Scenario read_scenario(const std::string& name) {
    const std::string dir = std::string(US_TEST_DATA_DIR) + "/kineto/blame/" + name;
    Scenario s;
    std::ifstream in(dir + "/meta.json");
    s.meta = nlohmann::json::parse(in);
    DigestOptions options;
    options.use_cache = false;  // the committed folder stays as committed
    const RunDigests run = digest_run({dir}, options);
    INFO(name);
    REQUIRE(run.errors.empty());
    REQUIRE(run.ranks.size() == s.meta["ranks"].get<size_t>());
    s.blame = blame(run.ranks);
    return s;
}

// No rank is named that the recording did not slow.
void check_no_false_culprit(const Scenario& s) {
    INFO(s.meta["scenario"].get<std::string>() << ": " << s.blame.verdict);
    if (!s.blame.culprit) return;
    REQUIRE(s.meta["culprit"]["kind"] == "slow_rank");
    CHECK(s.blame.stragglers.front().rank == s.meta["culprit"]["rank"].get<int>());
}

}  // namespace

TEST_CASE("blame names the slowed rank of real 4- and 8-rank DDP runs (gloo, forward 3x on one rank)", "[cpu][blame]") {
    const Scenario s = read_scenario(GENERATE(as<std::string>{}, "ddp_slow_rank", "ddp_slow_rank_8"));
    INFO(s.meta["scenario"].get<std::string>() << ": " << s.blame.verdict);
    REQUIRE(s.blame.culprit);
    const Straggler& top = s.blame.stragglers.front();
    CHECK(top.rank == s.meta["culprit"]["rank"].get<int>());
    CHECK(top.share > 0.5);
    CHECK(top.compute_vs_median > 1.1);  // it is late because it computes more (its forward only: 1.24x)
    CHECK(s.blame.verdict.find("holds the run back") != std::string::npos);
}

TEST_CASE("blame names nobody in a real DDP run where nothing was slowed", "[cpu][blame]") {
    const Scenario s = read_scenario("ddp_no_culprit");
    INFO(s.blame.verdict);
    CHECK(s.meta["culprit"]["kind"] == "none");
    CHECK_FALSE(s.blame.culprit);
    CHECK(s.blame.collectives_matched > 0);  // there were collectives to judge
    CHECK(s.blame.verdict.rfind("nothing stands out", 0) == 0);
    CHECK_FALSE(s.blame.why_not.empty());
}

TEST_CASE("blame finds the heavy stage of a real 4-stage 1F1B pipeline and who waits on it", "[cpu][blame]") {
    const Scenario s = read_scenario("pipeline_heavy_stage");
    INFO(s.blame.verdict);
    REQUIRE(s.blame.pipelines.size() == 1);
    const PipelineBlame& p = s.blame.pipelines.front();
    CHECK(p.ranks == std::vector<int>{0, 1, 2, 3});
    CHECK(p.bottleneck_stage == s.meta["culprit"]["stage"].get<int>());
    CHECK(p.bottleneck_rank == s.meta["culprit"]["rank"].get<int>());
    CHECK(p.stands_out);
    // the stage after the heavy one waits for its activations more than the stage before it does
    CHECK(p.stages[3].waiting_upstream_s > p.stages[1].waiting_upstream_s);
    check_no_false_culprit(s);
}

TEST_CASE("blame never names a rank that was not slowed in the real recordings, and ranks FSDP2's first",
          "[cpu][blame]") {
    for (const char* name : {"ddp_no_culprit", "fsdp2_slow_rank", "pipeline_heavy_stage"}) {
        const Scenario s = read_scenario(name);
        check_no_false_culprit(s);
    }
    // FSDP2's slowed rank causes the most waiting but is not named: the next rank caused 0.66x as much (README.md)
    const Scenario fsdp = read_scenario("fsdp2_slow_rank");
    REQUIRE_FALSE(fsdp.blame.stragglers.empty());
    CHECK(fsdp.blame.stragglers.front().rank == fsdp.meta["culprit"]["rank"].get<int>());
}
