// The Compare view's waterfall (app/gui/model/diff_waterfall.h): from A's step, each cause's bar starts where the
// last ended, the unexplained part closes the gap, and the bars land on B's step; causes beyond the most shown are
// summed into one bar.
#include <catch2/catch.hpp>

#include "app/gui/model/diff_waterfall.h"

using namespace us;

TEST_CASE("diff waterfall: the bars walk from A's step to B's, one per cause", "[cpu][diff]") {
    prof::RunDiff d;
    d.a_step_ms = 100, d.b_step_ms = 122, d.delta_ms = 22, d.unexplained_ms = 2;
    d.causes = {{prof::CauseKind::straggler, "", 30, "derived", "dp", 5},
                {prof::CauseKind::compute, "attention", -10, "measured"}};
    const std::vector<gui::WaterfallBar> bars = gui::waterfall_bars(d);
    REQUIRE(bars.size() == 5);
    CHECK(bars[0].label == "A's step");
    CHECK(bars[0].to_ms == 100);
    CHECK(bars[1].label == "straggler, rank 5");
    CHECK(bars[1].from_ms == 100);
    CHECK(bars[1].to_ms == 130);
    CHECK(bars[1].cause == 0);
    CHECK(bars[1].source == "derived");
    CHECK(bars[2].label == "compute (attention)");
    CHECK(bars[2].to_ms == 120);
    CHECK(bars[3].label == "unexplained");
    CHECK(bars[3].to_ms == Approx(d.b_step_ms));
    CHECK(bars[4].label == "B's step");
    CHECK(bars[4].to_ms == 122);
    // two causes shown at most one: the other summed
    const std::vector<gui::WaterfallBar> one = gui::waterfall_bars(d, 1);
    REQUIRE(one.size() == 5);
    CHECK(one[2].label == "1 smaller causes");
    CHECK(one[3].to_ms == Approx(d.b_step_ms));
}

TEST_CASE("diff waterfall: a run kept without its facts is said, not diffed", "[cpu][diff]") {
    std::string why;
    CHECK_FALSE(gui::diff_summaries({gui::RunSummary{}, gui::RunSummary{}}, 0, 1, why));
    CHECK(why.find("without its cross-rank facts") != std::string::npos);
}

namespace {

// A kept run of one rank whose steady steps take `step_s` of compute each, with `config` as its settings.
gui::RunSummary kept_run(const std::string& label, double step_s, const nlohmann::json& config) {
    prof::RankDigest d;
    d.rank = 0, d.label = "rank 0", d.source = "engine", d.world_size = 1, d.ops_complete = true;
    for (int step = 1; step <= 4; ++step) {
        prof::DigestStep s;
        s.step = step, s.begin = int64_t(step) * 1'000'000'000, s.end = s.begin + int64_t(step_s * 1e9);
        s.wall_s = s.compute_s = step_s;
        d.steps.push_back(s);
    }
    d.kind_self_s[size_t(prof::ComputeKind::gemm)] = step_s;
    d.ops.push_back({"matmul", prof::OpClass::gemm, 1, step_s, prof::ComputeKind::gemm});
    gui::RunSummary r;
    r.label = label, r.config = config;
    r.cross = std::make_shared<const prof::CrossRank>(prof::cross_rank({d}));
    return r;
}

}  // namespace

TEST_CASE(
    "diff waterfall: the session's other runs of A's or B's settings are the diff's repeats, the noise between "
    "runs",
    "[cpu][diff]") {
    const nlohmann::json dp1 = {{"preset", "tiny"}, {"dp", 1}}, zero1 = {{"preset", "tiny"}, {"dp", 1}, {"zero", 1}},
                         zero2 = {{"preset", "tiny"}, {"dp", 1}, {"zero", 2}};
    // runs 1 and 3 have the same settings and read 0.10 and 0.13 s a step; run 2 (B) 0.12 s and run 5, B's settings
    // again, 0.125 s; run 4 another setting
    const std::vector<gui::RunSummary> kept = {kept_run("run 1", 0.10, dp1), kept_run("run 2", 0.12, zero1),
                                               kept_run("run 3", 0.13, dp1), kept_run("run 4", 0.30, zero2),
                                               kept_run("run 5", 0.125, zero1)};
    std::string why;
    const auto d = gui::diff_summaries(kept, 0, 1, why);
    INFO(why);
    REQUIRE(d);
    REQUIRE(d->repeats.size() == 2);
    CHECK(d->repeats[0].name == "run 3");
    CHECK(d->repeats[0].of == 'A');
    CHECK(d->repeats[1].name == "run 5");
    CHECK(d->repeats[1].of == 'B');
    CHECK(*d->noise_between_ms == Approx(30));  // A's pair moved 30 ms, B's 5
    CHECK(d->noise_between_of == 'A');
    CHECK(d->delta_ms == Approx(20));
    CHECK(d->within_noise);
    REQUIRE(d->settings);
    CHECK(prof::describe_changes(*d->settings) == "zero 0 -> 1");
    // run 4 against run 2: no other run of run 4's settings, B's pair moved 5 ms: far from the 180 ms change
    const auto alone = gui::diff_summaries(kept, 3, 1, why);
    REQUIRE(alone);
    REQUIRE(alone->repeats.size() == 1);
    CHECK(alone->repeats[0].of == 'B');
    CHECK(*alone->noise_between_ms == Approx(5));
    CHECK_FALSE(alone->within_noise);
    // imported runs ({} for settings: unknown) are no one's repeats, and their settings changed are unknown
    const nlohmann::json imported = nlohmann::json::object();
    const std::vector<gui::RunSummary> traces = {kept_run("job 1", 0.10, imported), kept_run("job 2", 0.20, imported),
                                                 kept_run("job 3", 0.50, imported)};
    const auto jobs = gui::diff_summaries(traces, 0, 1, why);
    REQUIRE(jobs);
    CHECK(jobs->repeats.empty());
    CHECK_FALSE(jobs->settings);
}
