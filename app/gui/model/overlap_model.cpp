#include "app/gui/model/overlap_model.h"

#include <fmt/format.h>

namespace us::gui {

std::map<int, std::string> blamed_ranks(const prof::Blame& blame) {
    std::map<int, std::string> marks;
    for (const prof::Straggler& s : blame.stragglers)
        if (s.stands_out) marks[s.rank] = "holds the run back";
    for (const prof::PipelineBlame& p : blame.pipelines)
        if (p.stands_out && !marks.count(p.bottleneck_rank))
            marks[p.bottleneck_rank] = fmt::format("bottleneck stage {}", p.bottleneck_stage);
    return marks;
}

OverlapModel build_overlap_model(const prof::Report& report) {
    OverlapModel m;
    const std::map<int, std::string> marks = blamed_ranks(report.cross.blame);
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
        if (const auto it = marks.find(r.rank); it != marks.end() && m.marked < 0) {
            m.marked = int(m.bars.size());
            m.mark = it->second;
        }
        m.bars.push_back(b);
    }
    return m;
}

std::string overlap_group_label(const prof::RankReport& r, int group) {
    std::string name(prof::group_kind_name(prof::GroupKind(group)));
    if (r.group_hosts[size_t(group)] > 1)
        name += " (across " + std::to_string(r.group_hosts[size_t(group)]) + " nodes)";
    return name;
}

}  // namespace us::gui
