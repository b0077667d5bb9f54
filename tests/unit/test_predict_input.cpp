// A run's settings read from its trace (PredictInput::from_config): held to the engine's rules before any figure
// divides by them. A damaged trace with heads, tp, cp or ep of 0 ended the report with SIGFPE.
#include <catch2/catch.hpp>

#include "common/core/check.h"
#include "common/settings/config.h"
#include "profiler/predict/predict.h"

using namespace us;

TEST_CASE("predict input: a trace's settings that break the engine's rules are refused, naming the rule",
          "[cpu][predict]") {
    TrainConfig cfg;
    const nlohmann::json good = cfg.to_json();
    CHECK_NOTHROW(predict::PredictInput::from_config(good));
    for (const char* key : {"heads", "tp", "cp", "ep", "layers", "seq", "batch", "grad_accum"}) {
        INFO(key);
        nlohmann::json bad = good;
        bad[key] = 0;
        CHECK_THROWS_AS(predict::PredictInput::from_config(bad), UserError);
        CHECK_THROWS_WITH(predict::PredictInput::from_config(bad), Catch::Contains("break the engine's rules"));
    }
    nlohmann::json uneven = good;
    uneven["heads"] = 3, uneven["tp"] = 2;  // heads that do not split over tp
    CHECK_THROWS_AS(predict::PredictInput::from_config(uneven), UserError);
    CHECK_NOTHROW(predict::PredictInput::from_config(nlohmann::json()));  // no settings: the defaults
}
