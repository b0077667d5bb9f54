#include "profiler/analysis/collective_waits.h"
#include "profiler/transport/rank_metadata.h"

#include <algorithm>
#include <string>
#include <vector>

namespace us::prof {

namespace {}  // namespace

// The ranks that share every grid coordinate but the group's own form one instance of the group.
std::string engine_group_instance(const GridCoords& coords, int group) {
    const GroupKind kind = GroupKind(group);
    if (kind == GroupKind::world) return "world";
    const GroupKind own = kind == GroupKind::embedding ? GroupKind::pp : kind;
    auto at = [&](GridDim d) { return coords[d].value_or(0); };
    std::string key;
    for (const GroupKind dim : {GroupKind::dp, GroupKind::pp, GroupKind::tp, GroupKind::cp}) {
        if (own == dim || (own == GroupKind::dp && dim == GroupKind::cp)) continue;  // dp reduces over dp x cp
        if (own == GroupKind::edp && (dim == GroupKind::cp || dim == GroupKind::dp)) {
            if (dim == GroupKind::dp) key += "ep=" + std::to_string(at(GridDim::ep)) + ";";
            continue;  // the ranks holding the same experts: same dp % ep, any dp / ep and cp
        }
        if (own == GroupKind::ep && dim == GroupKind::dp) {  // the ep dp ranks of one expert group
            key += "group=" + std::to_string(at(GridDim::dp) - at(GridDim::ep)) + ";";
            continue;
        }
        key += std::string(group_kind_name(dim)) + "=" + std::to_string(at(*grid_dim_of(dim))) + ";";
    }
    return key;
}

namespace {

// One matched collective of a rank: its span and how long it waited for the group's last rank.
struct Matched {
    int group;
    int64_t begin, end, wait;
};

// rank -> its collectives over the spans of steps >= first_step, each with its wait: the k-th collective of a group
// instance is the same operation on each of its ranks, and the shortest of its durations is the transfer.
std::map<int, std::vector<Matched>> matched_collectives(const TraceStore& store, int first_step) {
    std::map<int, std::vector<Matched>> out;
    // (group, instance) -> per member rank, its collectives in issue (begin) order
    std::map<std::pair<int, std::string>, std::map<int, std::vector<const Span*>>> members;
    for (int r : store.ranks()) {
        out[r];
        const RankTrace& rt = *store.rank(r);
        const GridCoords& coords = rt.info.coords;
        for (const Span& s : rt.lanes[size_t(Lane::comm)].spans()) {  // sorted by begin
            if (s.kind != SpanKind::comm || s.group >= kGroupCount || s.step < first_step) continue;
            // Collectives only: point-to-point transfers (the cp ring's) overlap each other and pair up across
            // ranks as send and receive, not as one operation.
            if (s.op == OpClass::send || s.op == OpClass::recv) continue;
            members[{s.group, engine_group_instance(coords, s.group)}][r].push_back(&s);
        }
    }
    for (const auto& [group, ranks] : members) {
        if (ranks.size() < 2) continue;
        size_t count = SIZE_MAX;  // a truncated trace: match what every member recorded
        for (const auto& [r, spans] : ranks) count = std::min(count, spans.size());
        for (size_t k = 0; k < count; ++k) {
            int64_t transfer = INT64_MAX;
            for (const auto& [r, spans] : ranks) transfer = std::min(transfer, spans[k]->end - spans[k]->begin);
            for (const auto& [r, spans] : ranks)
                out[r].push_back(
                    {group.first, spans[k]->begin, spans[k]->end, spans[k]->end - spans[k]->begin - transfer});
        }
    }
    return out;
}

}  // namespace

std::map<int, std::array<double, kGroupCount>> collective_waits(const TraceStore& store, int first_steady_step) {
    std::map<int, std::array<double, kGroupCount>> waits;
    for (const auto& [r, collectives] : matched_collectives(store, first_steady_step)) {
        waits[r].fill(0.0);
        for (const Matched& m : collectives) waits[r][size_t(m.group)] += double(m.wait) / 1e9;
    }
    return waits;
}

std::map<int, std::vector<Interval>> collective_wait_intervals(const TraceStore& store, int group) {
    std::map<int, std::vector<Interval>> out;
    for (const auto& [r, collectives] : matched_collectives(store, 0))
        for (const Matched& m : collectives)
            if (m.group == group && m.wait > 0) out[r].emplace_back(m.begin, m.begin + m.wait);
    for (auto& [r, waits] : out) waits = union_of(std::move(waits), INT64_MIN, INT64_MAX);
    return out;
}

}  // namespace us::prof
