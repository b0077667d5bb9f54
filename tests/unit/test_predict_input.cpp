// A run's settings read from its trace (PredictInput::from_config): every size a figure divides by is checked
// before it does. A damaged trace with heads, tp, cp or ep of 0 ended the report with SIGFPE.
#include <catch2/catch.hpp>

#include "common/core/check.h"
#include "common/settings/config.h"
#include "profiler/predict/predict.h"

using namespace us;

TEST_CASE("predict input: a trace's settings with a size of 0 are refused, naming it", "[cpu][predict]") {
    TrainConfig cfg;
    const nlohmann::json good = cfg.to_json();
    CHECK_NOTHROW(predict::PredictInput::from_config(good));
    for (const char* key : {"heads", "tp", "cp", "ep", "layers", "seq", "batch", "grad_accum"}) {
        INFO(key);
        nlohmann::json bad = good;
        bad[key] = 0;
        CHECK_THROWS_AS(predict::PredictInput::from_config(bad), UserError);
        CHECK_THROWS_WITH(predict::PredictInput::from_config(bad), Catch::Contains(std::string(key) + " 0"));
    }
    // a shape the engine would not train but the planner models (its own predicted traces): read
    nlohmann::json planned = good;
    planned["vocab"] = 100;
    CHECK_NOTHROW(predict::PredictInput::from_config(planned));
    CHECK_NOTHROW(predict::PredictInput::from_config(nlohmann::json()));  // no settings: the defaults
}
