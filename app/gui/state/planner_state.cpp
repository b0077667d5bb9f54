#include "app/gui/state/planner_state.h"

#include <algorithm>

#include "common/core/check.h"

namespace us::gui {

void PlannerState::start() {
    if (m_pending.valid()) m_pending.wait();
    const std::string model_spec = model, cluster_spec = cluster;
    const int64_t n = gpus, batch = global_batch;
    error.clear();
    m_pending = std::async(std::launch::async, [=] {
        Plan p;
        p.model = predict::load_model(model_spec);
        p.cluster = predict::load_cluster(cluster_spec);
        plan::SearchOptions o = plan::default_search_options(p.cluster);  // as `ultrascope plan` asks
        o.gpus = n;
        o.global_batch_sequences = batch;
        p.search = plan::search(p.model, p.cluster, o);
        return p;
    });
}

void PlannerState::poll() {
    if (!m_pending.valid() || m_pending.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
    try {
        result = m_pending.get();
        selected = 0;
    } catch (const std::exception& e) {
        error = e.what();
        m_pending = {};
    }
}

bool runnable_here(const predict::ModelDesc& model, const predict::PlanResult& r) {
    return model.family == predict::ModelFamily::engine_gpt && r.layout.world() <= 8;
}

int64_t measured_modelled_peak(const prof::Report& report, const predict::MemoryEstimate& predicted) {
    return prof::most_modelled_sum_of_peaks(report, predicted.modelled);
}

}  // namespace us::gui
