// The hang limit of a launched run (app/launch/hang_watch.h): --hang-timeout when given, else ten times the longest
// wait between steps (at least 10 s), two minutes before the first step.
#include "app/launch/hang_watch.h"
#include "test_util.h"

using us::app::HangWatch;

TEST_CASE("hang watch: before the first step the run has two minutes", "[cpu][flight]") {
    HangWatch w;
    CHECK(w.limit_s() == HangWatch::kFirstStepLimitS);
    CHECK_FALSE(w.stalled(100));
    CHECK(w.stalled(121));
    HangWatch longer(300);  // a --hang-timeout longer than two minutes covers the start too
    CHECK(longer.limit_s() == 300);
}

TEST_CASE("hang watch: the limit follows the run's slowest wait between steps", "[cpu][flight]") {
    HangWatch w;
    w.observe(1, 400, 30);  // the first step's wait (start-up) sizes nothing but its own time
    CHECK(w.limit_s() == HangWatch::kMinLimitS);
    w.observe(2, 500, 30.5);
    w.observe(3, 500, 31.0);
    CHECK(w.limit_s() == HangWatch::kMinLimitS);  // 10 x 0.5 s is under the floor
    w.observe(4, 500, 35.0);                      // a checkpoint's save: 4 s between steps
    CHECK(w.limit_s() == Approx(40));
    CHECK_FALSE(w.stalled(70));
    CHECK(w.stalled(76));
    CHECK(w.last_step() == 4);
    CHECK(w.since_progress_s(76) == Approx(41));
    w.observe(4, 500, 80);  // the same step again is no progress
    CHECK(w.stalled(80));
}

TEST_CASE("hang watch: --hang-timeout overrides the measured limit once steps run", "[cpu][flight]") {
    HangWatch w(5);
    CHECK(w.limit_s() == HangWatch::kFirstStepLimitS);
    // before the first step the start-up limit holds, and the message says so rather than crediting the flag
    CHECK(w.limit_said().find("the limit before the first step: 120 s") == 0);
    w.observe(1, 100, 3);
    w.observe(2, 100, 3.1);
    CHECK(w.limit_s() == 5);
    CHECK(w.limit_said() == "the limit: 5 s, the run's --hang-timeout");
    CHECK_FALSE(w.stalled(7.9));
    CHECK(w.stalled(8.2));
}
