// The Ranks view's heatmap, groups, order and marks (ranks_model.h).
#include "app/gui/model/ranks_model.h"

#include "app/gui/model/overlap_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <set>

namespace us::gui {

namespace {

// The group a rank falls in under `group_by`, as a sortable key and a label; empty when it has none.
std::pair<std::string, std::string> group_of(const prof::RankDigest& d, const std::string& group_by) {
    if (group_by.empty()) return {"", ""};
    if (group_by.rfind("pg ", 0) == 0) {
        const std::string name = group_by.substr(3);
        for (const prof::DigestGroup& g : d.groups)
            if (g.name == name)
                return {g.key, g.ranks.empty() ? g.name : fmt::format("{} {}", g.name, nlohmann::json(g.ranks).dump())};
        return {"~", "not in " + name};
    }
    std::optional<int> at;
    for (prof::GridDim dim : prof::kGridDims)
        if (prof::grid_dim_name(dim) == group_by) at = d.coords[dim];
    if (!at) return {"~", "no " + group_by};
    return {fmt::format("{:08d}", *at), fmt::format("{} {}", group_by, *at)};
}

std::vector<std::string> groupings_of(const std::vector<prof::RankDigest>& digests) {
    std::map<std::string, std::set<std::string>> values;  // grouping -> its distinct keys
    for (const prof::RankDigest& d : digests) {
        for (prof::GridDim dim : prof::kGridDims)
            if (const std::optional<int>& v = d.coords[dim])
                values[std::string(prof::grid_dim_name(dim))].insert(std::to_string(*v));
        for (const prof::DigestGroup& g : d.groups)
            if (!g.ranks.empty()) values["pg " + g.name].insert(g.key);
    }
    std::vector<std::string> out = {""};
    for (const auto& [name, keys] : values)
        if (keys.size() > 1) out.push_back(name);
    return out;
}

// A step's figure of a digest (the waits come from the blame, 0 here).
double step_figure(const prof::DigestStep& s, RankFigure figure) {
    switch (figure) {
        case RankFigure::compute:
            return s.compute_s;
        case RankFigure::exposed:
            return s.exposed_s;
        case RankFigure::bubble:
            return s.bubble_s;
        case RankFigure::idle:
            return s.idle_s;
        case RankFigure::core_wait:
            return s.core_wait_s;  // -1 where unknown: the cell stays blank
        case RankFigure::worker_core_wait:
            return s.worker_core_wait_s;
        default:
            return 0;
    }
}

// The cells in digest order, each rank's total of the figure, and the waiting each caused.
struct Cells {
    size_t cols = 0;
    std::vector<float> cells;  // [digest * cols + column]; < 0 where the rank lacks the step
    std::vector<double> totals, caused;
};

Cells cells_of(const std::vector<prof::RankDigest>& digests, const prof::Blame& blame, RankFigure figure,
               const std::vector<int>& steps) {
    std::map<int, size_t> column;
    for (size_t c = 0; c < steps.size(); ++c) column[steps[c]] = c;
    std::map<int, size_t> index_of_rank;
    for (size_t i = 0; i < digests.size(); ++i) index_of_rank[digests[i].rank] = i;
    const size_t n = digests.size();
    Cells out;
    out.cols = steps.size();
    out.cells.assign(n * out.cols, -1.0f);
    out.totals.assign(n, 0.0);
    out.caused.assign(n, 0.0);
    auto add = [&](size_t i, int step, double v) {
        float& c = out.cells[i * out.cols + column.at(step)];
        c = std::max(0.0f, c) + float(v);
        out.totals[i] += v;
    };
    for (size_t i = 0; i < n; ++i)
        for (const prof::DigestStep& s : digests[i].steps)
            if (const double v = step_figure(s, figure); v >= 0) add(i, s.step, v);
    for (const prof::RankStepWait& w : blame.waits) {
        const auto it = index_of_rank.find(w.rank);
        if (it == index_of_rank.end() || !column.count(w.step)) continue;
        out.caused[it->second] += w.caused_s;
        if (figure == RankFigure::caused) add(it->second, w.step, w.caused_s);
        if (figure == RankFigure::suffered) add(it->second, w.step, w.suffered_s);
    }
    return out;
}

// The rows: by group, then in the order asked for (ties by rank); the cells and totals copied in that order, the
// groups' first rows and labels noted.
void order_rows(RanksModel& m, const std::vector<prof::RankDigest>& digests, const Cells& c,
                const std::string& group_by, RankOrder order) {
    const size_t n = digests.size(), cols = c.cols;
    std::vector<std::pair<std::string, std::string>> groups(n);
    for (size_t i = 0; i < n; ++i) groups[i] = group_of(digests[i], group_by);
    std::vector<size_t> rows(n);
    std::iota(rows.begin(), rows.end(), 0);
    auto value_of = [&](size_t i) {
        return order == RankOrder::value ? c.totals[i] : order == RankOrder::caused ? c.caused[i] : 0.0;
    };
    std::stable_sort(rows.begin(), rows.end(), [&](size_t a, size_t b) {
        if (groups[a].first != groups[b].first) return groups[a].first < groups[b].first;
        if (value_of(a) != value_of(b)) return value_of(a) > value_of(b);
        return digests[a].rank < digests[b].rank;
    });
    m.rows = rows;
    m.cells.resize(n * cols);
    m.totals.resize(n);
    for (size_t r = 0; r < n; ++r) {
        const size_t i = rows[r];
        std::copy_n(c.cells.begin() + std::ptrdiff_t(i * cols), cols, m.cells.begin() + std::ptrdiff_t(r * cols));
        m.totals[r] = c.totals[i];
        if (r == 0 || groups[i].first != groups[rows[r - 1]].first) {
            m.group_starts.push_back(r);
            m.group_labels.push_back(groups[i].second);
        }
    }
}

}  // namespace

RanksModel build_ranks_model(const std::vector<prof::RankDigest>& digests, const prof::Blame& blame, RankFigure figure,
                             const std::string& group_by, RankOrder order) {
    RanksModel m;
    m.groupings = groupings_of(digests);
    std::set<int> steps;
    for (const prof::RankDigest& d : digests)
        for (const prof::DigestStep& s : d.steps) steps.insert(s.step);
    m.steps.assign(steps.begin(), steps.end());
    order_rows(m, digests, cells_of(digests, blame, figure, m.steps), group_by, order);
    for (float c : m.cells) m.max_value = std::max(m.max_value, c);
    m.marks = blamed_ranks(blame);
    return m;
}

}  // namespace us::gui
