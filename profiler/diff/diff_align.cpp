// Two runs lined up by rank and by op (diff_align.h).
#include "profiler/diff/diff_align.h"

#include <map>

namespace us::prof {

namespace {

bool all_coords_known(const RunFigures& f) {
    for (const RankFigures& r : f.ranks)
        if (r.coords.empty()) return false;
    return !f.ranks.empty();
}

// A rank's key in the other run: its grid coordinates as text, or its rank number.
std::string rank_key(const RankFigures& r, bool by_coords) {
    return by_coords ? grid_json(r.coords).dump() : std::to_string(r.rank);
}

}  // namespace

RankAlignment align_ranks(const RunFigures& a, const RunFigures& b) {
    RankAlignment out;
    const bool by_coords = all_coords_known(a) && all_coords_known(b);
    out.by = by_coords ? "grid coordinates" : "rank";
    std::map<std::string, size_t> in_b;
    for (size_t i = 0; i < b.ranks.size(); ++i) in_b[rank_key(b.ranks[i], by_coords)] = i;
    std::vector<bool> b_taken(b.ranks.size(), false);
    for (size_t i = 0; i < a.ranks.size(); ++i) {
        const auto it = in_b.find(rank_key(a.ranks[i], by_coords));
        if (it == in_b.end()) {
            out.a_only.push_back(a.ranks[i].rank);
            continue;
        }
        out.pairs.push_back({i, it->second});
        b_taken[it->second] = true;
    }
    for (size_t i = 0; i < b.ranks.size(); ++i)
        if (!b_taken[i]) out.b_only.push_back(b.ranks[i].rank);
    return out;
}

std::vector<AlignedOp> align_ops(const RunFigures& a, const RunFigures& b) {
    std::vector<AlignedOp> out;
    for (const auto& [key, fa] : a.ops) {
        AlignedOp op{key.first, key.second, fa.kind, fa.self_s, 0, OpMatch::both};
        if (const auto it = b.ops.find(key); it != b.ops.end())
            op.b_s = it->second.self_s;
        else
            op.match = b.ops_complete ? OpMatch::gone_from_a : OpMatch::unknown;
        out.push_back(std::move(op));
    }
    for (const auto& [key, fb] : b.ops)
        if (!a.ops.count(key))
            out.push_back(
                {key.first, key.second, fb.kind, 0, fb.self_s, a.ops_complete ? OpMatch::new_in_b : OpMatch::unknown});
    return out;
}

}  // namespace us::prof
