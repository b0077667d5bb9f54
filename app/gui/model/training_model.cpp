#include "app/gui/model/training_model.h"

#include <map>

#include "profiler/analysis/predict.h"

namespace us::gui {

std::vector<TrainingPoint> build_training_series(const prof::TraceStore& store) {
    std::map<int, TrainingPoint> by_step;
    const uint32_t loss = store.find_name("loss"), tps = store.find_name("tokens_per_s"), ms = store.find_name("step_ms");
    double peak = 0;
    for (int r : store.ranks()) {
        const prof::RankTrace& rt = *store.rank(r);
        peak += rt.metadata.value("device_peak_gflops", 0.0) * 1e9;
        auto read = [&](uint32_t name, double TrainingPoint::*field) {
            auto it = rt.counters.find(name);
            if (it == rt.counters.end()) return;
            for (const auto& p : it->second) {
                TrainingPoint& tp = by_step[p.step];
                tp.step = p.step;
                tp.*field = p.value;  // ranks agree (the loss is all-reduced; the slowest rank's time wins below)
            }
        };
        read(loss, &TrainingPoint::loss);
        read(tps, &TrainingPoint::tokens_per_s);
        read(ms, &TrainingPoint::step_ms);
    }
    const prof::PredictInput in = prof::PredictInput::from_config(store.run_metadata().value("config", nlohmann::json::object()));
    const double flops_per_token = prof::predict(in).flops_per_token;
    std::vector<TrainingPoint> out;
    for (auto& [step, p] : by_step) {
        if (step <= 0) continue;
        p.mfu = peak > 0 ? p.tokens_per_s * flops_per_token / peak : 0;
        out.push_back(p);
    }
    return out;
}

}  // namespace us::gui
