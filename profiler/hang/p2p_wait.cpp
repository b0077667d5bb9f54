// The wait-for graph of point-to-point operations (p2p_wait.h). Each rank waits on at most one peer (its oldest
// unfinished p2p operation must finish first), so the graph is a set of chains and loops, walked in linear time.
#include "profiler/hang/p2p_wait.h"

#include <fmt/format.h>

#include <algorithm>

#include "profiler/hang/collective_call.h"

namespace us::hang {
namespace {

// One unfinished send or receive of a rank.
struct Pending {
    uint32_t group;  // aligned group index
    int peer;        // global rank
    bool send;
    const flight::FlightEntry* entry;
};

// The channel (group, from, to) of an operation: a send from A to B and B's receive from A share one.
uint64_t channel(uint32_t group, int from, int to) {
    return (uint64_t(group) << 42) ^ (uint64_t(uint32_t(from)) << 21) ^ uint64_t(uint32_t(to));
}

}  // namespace

void judge_p2p(const DumpSet& set, const AlignedGroups& aligned, std::vector<GroupState>& states,
               const std::unordered_map<int, uint32_t>& dump_of_rank) {
    // Every rank's unfinished operations, oldest first. A rank may post several before it waits (the engine's
    // pipeline posts its sends and receives, then waits), and a send the library has delivered may still read
    // "started" until its rank waits on it; so a rank's oldest unfinished operation is not what it is blocked in.
    std::vector<std::vector<Pending>> pending(set.dumps.size());
    std::unordered_map<uint64_t, int64_t> sends, recvs;  // unfinished per channel
    for (size_t di = 0; di < set.dumps.size(); ++di) {
        const flight::FlightDump& d = set.dumps[di];
        for (const flight::FlightEntry& e : d.entries) {
            if (!e.is_p2p || entry_completed(e) || e.peer < 0) continue;
            const uint32_t g = aligned.instance_of[di][e.group];
            const std::vector<int>& ranks = states[g].ranks;
            const int peer = e.peer < int(ranks.size()) ? ranks[size_t(e.peer)] : e.peer;
            const bool send = flight::op_short_name(d.op_name(e)).find("send") != std::string_view::npos;
            pending[di].push_back({g, peer, send, &e});
            if (send)
                ++sends[channel(g, d.rank, peer)];
            else
                ++recvs[channel(g, peer, d.rank)];
        }
    }
    // Operations pair up per channel in the order they were posted (MPI, gloo and NCCL match them so): the first
    // min(sends, receives) of a channel are transfers in flight; a rank waits in its oldest operation left unpaired.
    std::vector<const Pending*> waits(set.dumps.size(), nullptr);  // the operation each rank waits in, if any
    for (size_t di = 0; di < set.dumps.size(); ++di) {
        std::unordered_map<uint64_t, int64_t> seen;  // this rank's operations met so far per channel
        for (const Pending& p : pending[di]) {
            const int me = set.dumps[di].rank;
            const uint64_t ch = p.send ? channel(p.group, me, p.peer) : channel(p.group, p.peer, me);
            const int64_t answered = std::min(sends[ch], recvs[ch]);
            if (++seen[ch] <= answered) continue;  // a transfer in flight
            waits[di] = &p;
            break;
        }
    }
    // waits_on[i]: the dump index rank i waits on, -1 for none (no wait, or a peer without a dump).
    std::vector<int64_t> waits_on(set.dumps.size(), -1);
    for (size_t di = 0; di < set.dumps.size(); ++di) {
        if (!waits[di]) continue;
        const Pending& w = *waits[di];
        const auto peer = dump_of_rank.find(w.peer);
        GroupState& s = states[w.group];
        if (peer == dump_of_rank.end()) {
            // A peer without a dump: it holds this rank, whatever it did (died, hung before it could dump).
            if (s.kind == HangKind::none) {
                s.kind = HangKind::missing;
                s.culprit_ranks = {w.peer};
                s.collective = call_of(set.dumps[di], *w.entry);
                s.detail = fmt::format("rank {} waits in {} for rank {}, which left no dump", set.dumps[di].rank,
                                       call_label(s.collective), w.peer);
            }
            continue;
        }
        waits_on[di] = peer->second;
        if (!waits[peer->second] && s.kind == HangKind::none) {
            // The peer waits on nothing unanswered: it never posted the other side.
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
            const Pending& w = *waits[size_t(i)];
            cycle.push_back(set.dumps[size_t(i)].rank);
            how += fmt::format("{}rank {} waits in {} {} {}", how.empty() ? "" : ", ", set.dumps[size_t(i)].rank,
                               w.send ? "send to" : "recv from", "rank", w.peer);
            i = waits_on[size_t(i)];
            if (i == at) break;
        }
        std::sort(cycle.begin(), cycle.end());
        GroupState& s = states[waits[size_t(at)]->group];
        if (s.kind == HangKind::mismatch) continue;
        s.kind = HangKind::p2p_deadlock;
        s.culprit_ranks = cycle;
        s.collective = call_of(set.dumps[size_t(at)], *waits[size_t(at)]->entry);
        s.cycle = how;
        s.detail = "sends and receives wait on each other in a cycle: " + how;
    }
}

}  // namespace us::hang
