// The run's collectives matched across ranks (collective_match.h).
#include "profiler/analysis/collective_match.h"

#include <algorithm>

namespace us::prof {

const DigestCollective& CollectiveMatches::part(const std::vector<RankDigest>& digests, const MatchedCollective& c,
                                                size_t member) const {
    const InstanceMember& m = instances[c.instance].members[member];
    return digests[m.digest].collectives[m.parts[c.k]];
}

int64_t CollectiveMatches::wait_ns(const std::vector<RankDigest>& digests, const MatchedCollective& c,
                                   size_t member) const {
    const DigestCollective& p = part(digests, c, member);
    return p.end - p.begin - c.transfer_ns;
}

int CollectiveMatches::step(const std::vector<RankDigest>& digests, const MatchedCollective& c) const {
    return part(digests, c, 0).step;
}

namespace {

// Every instance with its members' collectives, each member's in issue order (their index within the group).
std::vector<GroupInstance> instances_of(const std::vector<RankDigest>& digests) {
    struct Found {
        std::string name;
        int group = 0;
        std::map<int, InstanceMember> by_rank;
    };
    std::map<std::string, Found> found;
    for (size_t at = 0; at < digests.size(); ++at) {
        const RankDigest& d = digests[at];
        for (size_t i = 0; i < d.collectives.size(); ++i) {
            const DigestGroup& g = d.groups[size_t(d.collectives[i].group)];
            const auto [it, fresh] = found.try_emplace(g.key);
            Found& f = it->second;
            if (fresh) f.group = g.id;
            if (f.name.empty()) f.name = g.name;
            InstanceMember& m = f.by_rank[d.rank];
            m.rank = d.rank, m.digest = at;
            m.parts.push_back(uint32_t(i));
        }
    }
    std::vector<GroupInstance> out;
    for (auto& [key, f] : found) {
        GroupInstance in{key, std::move(f.name), f.group, {}};
        for (auto& [rank, m] : f.by_rank) {
            const std::vector<DigestCollective>& all = digests[m.digest].collectives;
            std::sort(m.parts.begin(), m.parts.end(),
                      [&](uint32_t a, uint32_t b) { return all[a].index < all[b].index; });
            in.members.push_back(std::move(m));
        }
        out.push_back(std::move(in));
    }
    return out;
}

}  // namespace

CollectiveMatches match_collectives(const std::vector<RankDigest>& digests) {
    CollectiveMatches out;
    out.instances = instances_of(digests);
    for (uint32_t i = 0; i < uint32_t(out.instances.size()); ++i) {
        const std::vector<InstanceMember>& members = out.instances[i].members;
        if (members.size() < 2) continue;
        size_t count = SIZE_MAX;  // a trace cut short: what every member recorded
        for (const InstanceMember& m : members) count = std::min(count, m.parts.size());
        for (uint32_t k = 0; k < count; ++k) {
            MatchedCollective c{i, k, 0, INT64_MAX};
            for (uint32_t m = 0; m < members.size(); ++m) {
                const DigestCollective& p = digests[members[m].digest].collectives[members[m].parts[k]];
                if (p.end - p.begin < c.transfer_ns) c.transfer_ns = p.end - p.begin, c.last = m;
            }
            out.collectives.push_back(c);
        }
    }
    return out;
}

int first_steady_step(const std::vector<RankDigest>& digests) {
    int first = 0;
    for (const RankDigest& d : digests)
        if (const auto steady = d.steady(); !steady.empty()) first = std::max(first, steady.front().step);
    return first;
}

std::map<int, RankWaits> steady_waits(const CollectiveMatches& m, const std::vector<RankDigest>& digests,
                                      int first_step) {
    // Per rank: its waits' intervals by group (kGroupCount: every group, an imported one without a kind too).
    std::map<int, std::array<std::vector<Interval>, kGroupCount + 1>> spans;
    for (const RankDigest& d : digests) spans[d.rank];
    for (const MatchedCollective& c : m.collectives) {
        const GroupInstance& in = m.instances[c.instance];
        if (m.step(digests, c) < first_step) continue;
        const bool has_kind = in.group >= 0 && in.group < kGroupCount;
        for (size_t i = 0; i < in.members.size(); ++i)
            if (const int64_t wait = m.wait_ns(digests, c, i); wait > 0) {
                const int64_t begin = m.part(digests, c, i).begin;
                auto& by_group = spans[in.members[i].rank];
                if (has_kind) by_group[size_t(in.group)].emplace_back(begin, begin + wait);
                by_group[kGroupCount].emplace_back(begin, begin + wait);
            }
    }
    std::map<int, RankWaits> out;
    for (auto& [rank, by_group] : spans) {
        RankWaits& w = out[rank];
        for (size_t g = 0; g < kGroupCount; ++g)
            w.by_group[g] = double(total_length(union_of(std::move(by_group[g]), INT64_MIN, INT64_MAX))) / 1e9;
        w.all_s = double(total_length(union_of(std::move(by_group[kGroupCount]), INT64_MIN, INT64_MAX))) / 1e9;
    }
    return out;
}

std::map<int, std::vector<Interval>> wait_intervals(const CollectiveMatches& m, const std::vector<RankDigest>& digests,
                                                    int group) {
    std::map<int, std::vector<Interval>> out;
    for (const MatchedCollective& c : m.collectives) {
        const GroupInstance& in = m.instances[c.instance];
        if (in.group != group) continue;
        for (size_t i = 0; i < in.members.size(); ++i)
            if (const int64_t wait = m.wait_ns(digests, c, i); wait > 0) {
                const int64_t begin = m.part(digests, c, i).begin;
                out[in.members[i].rank].emplace_back(begin, begin + wait);
            }
    }
    for (auto& [r, waits] : out) waits = union_of(std::move(waits), INT64_MIN, INT64_MAX);
    return out;
}

}  // namespace us::prof
