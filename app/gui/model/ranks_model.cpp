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

}  // namespace

RanksModel build_ranks_model(const std::vector<prof::RankDigest>& digests, const prof::Blame& blame, RankFigure figure,
                             const std::string& group_by, RankOrder order) {
    RanksModel m;
    m.groupings = groupings_of(digests);
    std::set<int> steps;
    for (const prof::RankDigest& d : digests)
        for (const prof::DigestStep& s : d.steps) steps.insert(s.step);
    m.steps.assign(steps.begin(), steps.end());
    std::map<int, size_t> column;
    for (size_t c = 0; c < m.steps.size(); ++c) column[m.steps[c]] = c;
    std::map<int, size_t> index_of_rank;
    for (size_t i = 0; i < digests.size(); ++i) index_of_rank[digests[i].rank] = i;

    // The cells in digest order first.
    const size_t n = digests.size(), cols = m.steps.size();
    std::vector<float> cells(n * cols, -1.0f);
    std::vector<double> totals(n, 0.0);
    auto add = [&](size_t i, int step, double v) {
        float& c = cells[i * cols + column.at(step)];
        c = std::max(0.0f, c) + float(v);
        totals[i] += v;
    };
    for (size_t i = 0; i < n; ++i)
        for (const prof::DigestStep& s : digests[i].steps) {
            double v = 0;
            switch (figure) {
                case RankFigure::compute:
                    v = s.compute_s;
                    break;
                case RankFigure::exposed:
                    v = s.exposed_s;
                    break;
                case RankFigure::bubble:
                    v = s.bubble_s;
                    break;
                case RankFigure::idle:
                    v = s.idle_s;
                    break;
                default:
                    break;  // the waits come from the blame
            }
            add(i, s.step, v);
        }
    std::vector<double> caused(n, 0.0);
    for (const prof::RankStepWait& w : blame.waits) {
        const auto it = index_of_rank.find(w.rank);
        if (it == index_of_rank.end() || !column.count(w.step)) continue;
        caused[it->second] += w.caused_s;
        if (figure == RankFigure::caused) add(it->second, w.step, w.caused_s);
        if (figure == RankFigure::suffered) add(it->second, w.step, w.suffered_s);
    }

    // The rows: by group, then in the order asked for (ties by rank).
    std::vector<std::pair<std::string, std::string>> groups(n);
    for (size_t i = 0; i < n; ++i) groups[i] = group_of(digests[i], group_by);
    std::vector<size_t> order_rows(n);
    std::iota(order_rows.begin(), order_rows.end(), 0);
    auto value_of = [&](size_t i) {
        return order == RankOrder::value ? totals[i] : order == RankOrder::caused ? caused[i] : 0.0;
    };
    std::stable_sort(order_rows.begin(), order_rows.end(), [&](size_t a, size_t b) {
        if (groups[a].first != groups[b].first) return groups[a].first < groups[b].first;
        if (value_of(a) != value_of(b)) return value_of(a) > value_of(b);
        return digests[a].rank < digests[b].rank;
    });
    m.rows = order_rows;
    m.cells.resize(n * cols);
    m.totals.resize(n);
    for (size_t r = 0; r < n; ++r) {
        const size_t i = order_rows[r];
        std::copy_n(cells.begin() + std::ptrdiff_t(i * cols), cols, m.cells.begin() + std::ptrdiff_t(r * cols));
        m.totals[r] = totals[i];
        if (r == 0 || groups[i].first != groups[order_rows[r - 1]].first) {
            m.group_starts.push_back(r);
            m.group_labels.push_back(groups[i].second);
        }
    }
    for (float c : m.cells) m.max_value = std::max(m.max_value, c);

    m.marks = blamed_ranks(blame);
    return m;
}

}  // namespace us::gui
