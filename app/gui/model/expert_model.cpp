#include "app/gui/model/expert_model.h"

#include <algorithm>

namespace us::gui {

ExpertModel build_expert_model(const prof::Report& report) {
    ExpertModel m;
    const prof::ExpertRouting& ro = report.routing;
    for (const prof::LayerRouting& l : ro.layers) {
        ExpertHeatmap h;
        h.layer = l.layer;
        h.experts = ro.experts;
        h.steps = l.steps;
        h.imbalance_mean = l.imbalance_mean;
        h.imbalance_max = l.imbalance_max;
        h.dropped_fraction = l.dropped_fraction;
        h.load.assign(size_t(h.experts) * h.steps.size(), 0.0f);
        for (size_t c = 0; c < l.choices.size(); ++c) {
            double total = 0;
            for (double x : l.choices[c]) total += x;
            const double even = total / std::max(1, h.experts);
            for (int e = 0; e < h.experts; ++e) {
                const float v = even > 0 ? float(l.choices[c][size_t(e)] / even) : 0.0f;
                h.load[size_t(e) * h.steps.size() + c] = v;
                h.max_load = std::max(h.max_load, v);
            }
        }
        m.layers.push_back(std::move(h));
    }
    m.steps = ro.steps;
    for (double b : ro.balance) m.balance.push_back(float(b));
    if (report.predict_input.parallel.ep > 1) {
        const int ep = int(prof::GroupKind::ep);
        for (const auto& r : report.ranks) {
            const double steps = double(std::max<size_t>(1, prof::steady_step_count(r.steps)));
            ExpertRankTime t;
            t.rank = r.rank;
            t.label = r.label;
            t.experts_s = r.steady.experts_s / steps;
            t.ep_s = r.steady.group_comm_s[size_t(ep)] / steps;
            t.ep_wait_s = report.cross.group_waits_of(r.rank)[size_t(ep)] / steps;
            m.ranks.push_back(t);
        }
    }
    return m;
}

}  // namespace us::gui
