// The default run of the GUI and its headless fallback: dp 2 x pp 2 unless the user's flags say otherwise.
#include "app/launch/default_run.h"
#include "test_util.h"

using us::app::default_run;
using Args = std::vector<std::string>;

TEST_CASE("the default run is dp 2 x pp 2 with 4 micro-batches on the small preset for 60 steps", "[cpu][app]") {
    const auto d = default_run(0, {});
    CHECK(d.ranks == 4);
    CHECK(d.args == Args{"--preset", "small", "--dp", "2", "--pp", "2", "--grad-accum", "4", "--steps", "60"});
}

TEST_CASE("the user's flags win over the default run", "[cpu][app]") {
    CHECK(default_run(3, {}).args == Args{"--preset", "small", "--dp", "3"});  // -n alone: data parallel
    CHECK(default_run(3, {}).ranks == 3);
    const auto pp = default_run(0, {"--pp", "4", "--layers", "8"});
    CHECK(pp.ranks == 4);
    CHECK(pp.args == Args{"--preset", "small", "--pp", "4", "--layers", "8"});
    const auto m = default_run(0, {"--preset", "tiny", "--grad-accum", "8", "--steps", "5"});
    CHECK(m.args == Args{"--dp", "2", "--pp", "2", "--preset", "tiny", "--grad-accum", "8", "--steps", "5"});
    CHECK(default_run(0, {"--dp", "2", "--pp", "3"}).ranks == 6);
}
