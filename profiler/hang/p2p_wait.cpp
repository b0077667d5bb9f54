// The wait-for graph of point-to-point operations (p2p_wait.h). Each rank waits on at most one peer (its oldest
// unfinished p2p operation must finish first), so the graph is a set of chains and loops, walked in linear time.
#include "profiler/hang/p2p_wait.h"

#include <fmt/format.h>

#include <algorithm>

#include "profiler/hang/collective_call.h"

namespace us::hang {
namespace {

struct Wait {
    bool any = false;
    uint32_t group = 0;  // aligned group index
    int peer = -1;       // global rank
    bool send = false;
    const flight::FlightEntry* entry = nullptr;
};

bool answers(const Wait& a, int a_rank, const Wait& b) {
    return b.any && b.group == a.group && b.peer == a_rank && b.send != a.send;
}

}  // namespace

void judge_p2p(const DumpSet& set, const AlignedGroups& aligned, std::vector<GroupState>& states,
               const std::unordered_map<int, uint32_t>& dump_of_rank) {
    std::vector<Wait> waits(set.dumps.size());
    for (size_t di = 0; di < set.dumps.size(); ++di) {
        const flight::FlightDump& d = set.dumps[di];
        for (const flight::FlightEntry& e : d.entries) {
            if (!e.is_p2p || entry_completed(e) || e.peer < 0) continue;
            const uint32_t g = aligned.instance_of[di][e.group];
            const std::vector<int>& ranks = states[g].ranks;
            Wait& w = waits[di];
            w.any = true;
            w.group = g;
            w.peer = e.peer < int(ranks.size()) ? ranks[size_t(e.peer)] : e.peer;
            w.send = flight::op_short_name(d.op_name(e)).find("send") != std::string_view::npos;
            w.entry = &e;
            break;
        }
    }
    // waits_on[i]: the dump index rank i waits on, -1 for none (answered, no wait, or a peer without a dump).
    std::vector<int64_t> waits_on(set.dumps.size(), -1);
    for (size_t di = 0; di < set.dumps.size(); ++di) {
        const Wait& w = waits[di];
        if (!w.any) continue;
        const auto peer = dump_of_rank.find(w.peer);
        if (peer == dump_of_rank.end()) continue;
        if (answers(w, set.dumps[di].rank, waits[peer->second])) continue;  // a transfer in flight
        waits_on[di] = peer->second;
        GroupState& s = states[w.group];
        if (!waits[peer->second].any && s.kind == HangKind::none) {
            // The peer has no p2p outstanding: it never posted the other side.
            s.kind = HangKind::missing;
            s.culprit_ranks = {w.peer};
            s.collective = call_of(set.dumps[di], *w.entry);
            s.detail = fmt::format("rank {} waits in {} for rank {}, which never posted its side", set.dumps[di].rank,
                                   call_label(s.collective), w.peer);
        }
    }
    // Loops: follow each chain, marking the walk; a node met again on the same walk closes a loop.
    std::vector<int64_t> walk_of(set.dumps.size(), -1);
    for (size_t start = 0; start < set.dumps.size(); ++start) {
        int64_t at = int64_t(start);
        while (at >= 0 && walk_of[size_t(at)] < 0) {
            walk_of[size_t(at)] = int64_t(start);
            at = waits_on[size_t(at)];
        }
        if (at < 0 || walk_of[size_t(at)] != int64_t(start)) continue;
        std::vector<int> cycle;
        std::string how;
        for (int64_t i = at;;) {
            const Wait& w = waits[size_t(i)];
            cycle.push_back(set.dumps[size_t(i)].rank);
            how += fmt::format("{}rank {} waits in {} {} {}", how.empty() ? "" : ", ", set.dumps[size_t(i)].rank,
                               w.send ? "send to" : "recv from", "rank", w.peer);
            i = waits_on[size_t(i)];
            if (i == at) break;
        }
        std::sort(cycle.begin(), cycle.end());
        GroupState& s = states[waits[size_t(at)].group];
        if (s.kind == HangKind::mismatch) continue;
        s.kind = HangKind::p2p_deadlock;
        s.culprit_ranks = cycle;
        s.collective = call_of(set.dumps[size_t(at)], *waits[size_t(at)].entry);
        s.detail = "sends and receives wait on each other in a cycle: " + how;
    }
}

}  // namespace us::hang
