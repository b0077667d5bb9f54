#include "app/gui/model/training_model.h"

#include <algorithm>
#include <map>

#include "profiler/analysis/predict.h"

namespace us::gui {

std::vector<TrainingPoint> build_training_series(const prof::TraceStore& store) {
    std::map<int, TrainingPoint> by_step;
    const uint32_t loss = store.find_name("loss"), ms = store.find_name("step_ms");
    double peak = 0;
    for (int r : store.ranks()) {
        const prof::RankTrace& rt = *store.rank(r);
        peak += rt.metadata.value("device_peak_gflops", 0.0) * 1e9;
        if (auto it = rt.counters.find(loss); it != rt.counters.end())
            for (const auto& p : it->second) by_step[p.step].loss = p.value;  // all-reduced: the same on every rank
        if (auto it = rt.counters.find(ms); it != rt.counters.end())
            for (const auto& p : it->second) {  // a step lasts as long as its slowest rank
                TrainingPoint& tp = by_step[p.step];
                tp.step_ms = std::max(tp.step_ms, p.value);
            }
    }
    const nlohmann::json config = store.run_metadata().value("config", nlohmann::json::object());
    const prof::PredictInput in = prof::PredictInput::from_config(config);
    const prof::Prediction predicted = prof::predict(in);
    double tokens_per_step = double(predicted.tokens_per_step), flops_per_token = predicted.flops_per_token;
    // A planner's prediction: its model may not be the engine's, and its ranks stand for all the plan's GPUs.
    if (const nlohmann::json& meta = store.run_metadata(); meta.contains("predicted")) {
        tokens_per_step = meta.value("tokens_per_step", tokens_per_step);
        flops_per_token = meta["predicted"].value("model_flops_per_token", flops_per_token);
        if (!store.ranks().empty())
            peak = store.rank(store.ranks().front())->metadata.value("device_peak_gflops", 0.0) * 1e9 *
                   meta["predicted"].value("gpus", 1.0);
    }
    std::vector<TrainingPoint> out;
    for (auto& [step, p] : by_step) {
        if (step <= 0) continue;
        p.step = step;
        // one definition of throughput, the report's: the step's global tokens over the slowest rank's time
        p.tokens_per_s = p.step_ms > 0 ? tokens_per_step / (p.step_ms / 1e3) : 0;
        p.mfu = peak > 0 ? p.tokens_per_s * flops_per_token / peak : 0;
        out.push_back(p);
    }
    return out;
}

}  // namespace us::gui
