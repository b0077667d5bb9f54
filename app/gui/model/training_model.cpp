#include "app/gui/model/training_model.h"

#include <algorithm>
#include <map>

#include "profiler/analysis/report.h"

namespace us::gui {

std::vector<TrainingPoint> build_training_series(const prof::TraceStore& store) {
    std::map<int, TrainingPoint> by_step;
    const uint32_t loss = store.find_name("loss"), ms = store.find_name("step_ms");
    for (int r : store.ranks()) {
        const prof::RankTrace& rt = *store.rank(r);
        if (auto it = rt.counters.find(loss); it != rt.counters.end())
            for (const auto& p : it->second) by_step[p.step].loss = p.value;  // all-reduced: the same on every rank
        if (auto it = rt.counters.find(ms); it != rt.counters.end())
            for (const auto& p : it->second) {  // a step lasts as long as its slowest rank
                TrainingPoint& tp = by_step[p.step];
                tp.step_ms = std::max(tp.step_ms, p.value);
            }
    }
    // The engine's own step timer (step_ms), the slowest rank's a step: the report's step from spans agrees with it
    // to the timer's resolution. Tokens a step and the peak are the report's (throughput_basis).
    const prof::ThroughputBasis basis = prof::throughput_basis(store);
    std::vector<TrainingPoint> out;
    for (auto& [step, p] : by_step) {
        if (step <= 0) continue;
        p.step = step;
        // one definition of throughput, the report's: the step's global tokens over the slowest rank's time
        p.tokens_per_s = p.step_ms > 0 ? basis.tokens_per_step / (p.step_ms / 1e3) : 0;
        p.mfu = basis.peak_flops_per_s > 0 ? p.tokens_per_s * basis.flops_per_token / basis.peak_flops_per_s : 0;
        out.push_back(p);
    }
    return out;
}

}  // namespace us::gui
