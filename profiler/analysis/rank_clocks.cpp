// The ranks' clock offsets (rank_clocks.h).
#include "profiler/analysis/rank_clocks.h"

#include <cmath>
#include <map>

#include "profiler/analysis/pipeline_blame.h"

namespace us::prof {

// The ranks' clock offsets: the trace's where it gives them; else, from rank to rank through the groups they share,
// the median difference of their collectives' ends (a collective completes at about one moment on all its ranks),
// with the spread of those differences (1.4826 x their median absolute deviation) as the uncertainty.
std::vector<RankClock> clocks_of(const std::vector<RankDigest>& digests, const CollectiveMatches& m,
                                 const std::vector<bool>& read, int first_step) {
    std::vector<RankClock> out;
    std::map<int, size_t> at;
    bool given = true;
    for (const RankDigest& d : digests) {
        at[d.rank] = out.size();
        RankClock c;
        c.rank = d.rank;
        if (d.clock_offset_ns) {
            c.offset_ns = d.clock_offset_ns, c.uncertainty_ns = d.clock_uncertainty_ns, c.method = "the trace's";
        } else {
            given = false;
        }
        out.push_back(c);
    }
    if (given || out.empty()) return out;
    for (RankClock& c : out) c = RankClock{c.rank, std::nullopt, std::nullopt, "none"};
    RankClock& first = out.front();
    first.offset_ns = 0, first.uncertainty_ns = 0, first.method = "collectives (the reference)";
    auto part = [&](const InstanceMember& member, size_t k) -> const DigestCollective& {
        return digests[member.digest].collectives[member.parts[k]];
    };
    for (bool grew = true; grew;) {  // spread from known ranks through shared groups
        grew = false;
        for (size_t i = 0; i < m.instances.size(); ++i) {
            if (!read[i]) continue;
            const InstanceMember* known = nullptr;
            for (const InstanceMember& member : m.instances[i].members)
                if (out[at[member.rank]].offset_ns) known = &member;
            if (!known) continue;
            const RankClock& known_clock = out[at[known->rank]];
            for (const InstanceMember& member : m.instances[i].members) {
                RankClock& c = out[at[member.rank]];
                if (c.offset_ns) continue;
                std::vector<double> diffs;
                for (size_t k = 0; k < member.parts.size() && k < known->parts.size(); ++k)
                    if (part(member, k).step >= first_step)
                        diffs.push_back(double(part(member, k).end - part(*known, k).end));
                if (diffs.empty()) continue;
                const double med = median(diffs);
                std::vector<double> dev;
                for (double x : diffs) dev.push_back(std::abs(x - med));
                c.offset_ns = *known_clock.offset_ns + int64_t(std::llround(med));
                c.uncertainty_ns = known_clock.uncertainty_ns.value_or(0) + int64_t(std::llround(1.4826 * median(dev)));
                c.method = "collectives";
                grew = true;
            }
        }
    }
    return out;
}

}  // namespace us::prof
