#include "app/gui/model/overlap_model.h"

namespace us::gui {

OverlapModel build_overlap_model(const prof::Report& report) {
    OverlapModel m;
    double worst_loss = -1;
    for (const auto& r : report.ranks) {
        const auto& s = r.steady;
        OverlapBar b;
        b.rank = r.rank;
        b.label = r.label;
        b.wall_s = s.wall_s;
        if (s.wall_s > 0) {
            b.compute_only = (s.compute_s - s.overlapped_s) / s.wall_s;
            b.overlapped = s.overlapped_s / s.wall_s;
            b.exposed = s.exposed_s / s.wall_s;
            b.idle = s.idle_s / s.wall_s;
        }
        b.overlap_pct = s.overlap_pct;
        b.bubble_fraction = s.bubble_fraction;
        b.bubble_theory = r.predicted.bubble_theory;
        const double loss = s.exposed_s + s.idle_s;
        if (loss > worst_loss) {
            worst_loss = loss;
            m.worst = int(m.bars.size());
        }
        m.bars.push_back(b);
    }
    if (m.bars.size() < 2) m.worst = -1;  // "worst" needs someone to compare with
    return m;
}

}  // namespace us::gui
