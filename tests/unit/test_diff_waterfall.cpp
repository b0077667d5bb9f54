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
    gui::RunSummary a, b;
    std::string why;
    CHECK_FALSE(gui::diff_summaries(a, b, why));
    CHECK(why.find("without its cross-rank facts") != std::string::npos);
}
