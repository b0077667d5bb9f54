// `ultrascope predict [flags]`: docs/formulas.md's memory per category, FLOPs per token, communication per step and
// the bubble for a configuration, without running anything. Takes the same model and parallel flags (and
// presets and config files) as ultrascope-train.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "app/cli/commands.h"
#include "app/cli/parse_flags.h"
#include "common/settings/cli.h"
#include "profiler/predict/predict.h"

namespace us::app {

int predict_command(int argc, char** argv) {
    CLI::App cli{"ultrascope predict: what the formulas say a configuration needs (nothing is run)"};
    auto build = add_train_flags(cli);
    int stage = -1;
    bool json = false;
    cli.add_option("--stage", stage, "Pipeline stage to predict for (default: every stage)");
    cli.add_flag("--json", json, "Print JSON");
    US_PARSE_FLAGS(cli, argc, argv, "predict");
    TrainConfig cfg = build().config;
    cfg.validate();
    predict::PredictInput in = predict::PredictInput::from_config(cfg.to_json());
    nlohmann::json all = nlohmann::json::array();
    for (int s = 0; s < in.parallel.pp; ++s) {
        if (stage >= 0 && s != stage) continue;
        in.stage = s;
        const predict::Prediction p = predict::predict(in);
        if (json)
            all.push_back(predict::prediction_json(in, p));
        else
            std::printf("%s%s", s > 0 ? "\n" : "", predict::format_prediction(in, p).c_str());
    }
    if (json) std::printf("%s\n", all.dump(2).c_str());
    return 0;
}

}  // namespace us::app
