// The whole job's verdict (hang_analysis.h): every group judged (group_verdict.h, p2p_wait.h), then the groups
// whose hang is their own (roots) told from those held by another's (victims): a group is a victim when each of
// its culprits waits, unfinished, inside another hung group where it is not itself a culprit. The verdict is the
// first root by kind (a mismatch or a deadlock is a cause where a missing rank may be a symptom), then by how many
// groups it holds.
#include "profiler/hang/hang_analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "profiler/hang/collective_call.h"
#include "profiler/hang/group_alignment.h"
#include "profiler/hang/group_verdict.h"
#include "profiler/hang/hang_verdict_text.h"
#include "profiler/hang/p2p_wait.h"

namespace us::hang {
namespace {

// The group a rank waits in: its oldest unfinished entry's (-1 when everything it recorded finished).
std::vector<int> waiting_group(const DumpSet& set, const AlignedGroups& aligned) {
    std::vector<int> waiting(set.dumps.size(), -1);
    for (size_t di = 0; di < set.dumps.size(); ++di)
        for (const flight::FlightEntry& e : set.dumps[di].entries)
            if (!entry_completed(e)) {
                waiting[di] = int(aligned.instance_of[di][e.group]);
                break;
            }
    return waiting;
}

// A hung group is a victim when each of its culprits is explained elsewhere: it waits inside another hung group
// where it is no culprit (held there), or it is a culprit of another hung group whose culprits are fewer (that
// group names the cause more closely: a pair group's one missing rank, where the world group misses two; or the
// same ranks, missed earlier).
bool subset_of(const std::vector<int>& small, const std::vector<int>& big) {
    return small.size() < big.size() && std::includes(big.begin(), big.end(), small.begin(), small.end());
}

// Two hangs of the same ranks: the one whose collective the others entered first is the cause (the stopped rank
// missed it first); clocks of one job agree far better than a step.
bool entered_first(const GroupState& a, const GroupState& b) {
    return a.culprit_ranks == b.culprit_ranks && a.entered_ns >= 0 && b.entered_ns >= 0 && a.entered_ns < b.entered_ns;
}

void mark_roots(std::vector<GroupState>& groups, const std::vector<int>& waiting,
                const std::unordered_map<int, uint32_t>& dump_of_rank) {
    for (GroupState& s : groups) s.root = s.kind != HangKind::none;
    for (size_t g = 0; g < groups.size(); ++g) {
        GroupState& s = groups[g];
        if (s.kind != HangKind::missing || s.culprit_ranks.empty()) continue;
        int held_by = -1;
        bool all_explained = true;
        for (int r : s.culprit_ranks) {
            const auto d = dump_of_rank.find(r);
            int h = d == dump_of_rank.end() ? -1 : waiting[d->second];
            bool explained =
                h >= 0 && size_t(h) != g && groups[size_t(h)].kind != HangKind::none &&
                !std::binary_search(groups[size_t(h)].culprit_ranks.begin(), groups[size_t(h)].culprit_ranks.end(), r);
            for (size_t o = 0; o < groups.size() && !explained; ++o) {
                const GroupState& other = groups[o];
                if (o == g || other.kind == HangKind::none || other.kind == HangKind::inside_collective) continue;
                if (std::binary_search(other.culprit_ranks.begin(), other.culprit_ranks.end(), r) &&
                    (subset_of(other.culprit_ranks, s.culprit_ranks) || entered_first(other, s)))
                    explained = true, h = int(o);
            }
            if (!explained)
                all_explained = false;
            else if (held_by < 0)
                held_by = h;
        }
        if (all_explained) s.root = false, s.held_by = held_by;
    }
}

int kind_rank(HangKind k) {
    switch (k) {
        case HangKind::mismatch:
            return 0;
        case HangKind::p2p_deadlock:
            return 1;
        case HangKind::missing:
            return 2;
        case HangKind::inside_collective:
            return 3;
        case HangKind::none:
            return 4;
    }
    return 4;
}

int pick_root(const std::vector<GroupState>& groups) {
    std::vector<int> victims(groups.size(), 0);
    for (const GroupState& s : groups)
        for (int h = s.held_by, hops = 0; h >= 0 && hops < int(groups.size()); h = groups[size_t(h)].held_by, ++hops)
            ++victims[size_t(h)];
    int best = -1;
    for (size_t g = 0; g < groups.size(); ++g) {
        if (!groups[g].root) continue;
        if (best < 0) {
            best = int(g);
            continue;
        }
        const GroupState &a = groups[g], &b = groups[size_t(best)];
        if (kind_rank(a.kind) != kind_rank(b.kind) ? kind_rank(a.kind) < kind_rank(b.kind)
                                                   : victims[g] > victims[size_t(best)])
            best = int(g);
    }
    return best;
}

// The culprit's newest completed collective and the stack that matters: its entry in the root's collective where
// it has one (a mismatch, a p2p wait), else its newest entry (where it was when it stopped).
Culprit describe_culprit(const DumpSet& set, const std::unordered_map<int, uint32_t>& dump_of_rank, int rank,
                         const GroupState& root) {
    Culprit c;
    c.rank = rank;
    const auto it = dump_of_rank.find(rank);
    if (it == dump_of_rank.end()) {
        c.absent = true;
        return c;
    }
    const flight::FlightDump& d = set.dumps[it->second];
    c.host = d.host;
    const flight::FlightEntry* stack_entry = nullptr;
    for (size_t i = d.entries.size(); i-- > 0;) {
        const flight::FlightEntry& e = d.entries[i];
        if (c.last_completed.seq_id < 0 && entry_completed(e)) {
            c.last_completed = call_of(d, e);
            c.last_completed_group = group_label(d.group_name(e.group), d.group_desc(e.group));
        }
        const bool in_root = d.group_name(e.group) == root.name && d.group_desc(e.group) == root.desc &&
                             (e.is_p2p ? e.p2p_seq_id : e.collective_seq_id) == root.collective.seq_id &&
                             e.is_p2p == root.collective.p2p;
        if (in_root) stack_entry = &e;
    }
    if (!stack_entry && !d.entries.empty()) stack_entry = &d.entries.back();
    if (stack_entry) {
        c.stack = stack_of(d, *stack_entry);
        c.stack_of = fmt::format("{} of {}", call_label(call_of(d, *stack_entry)),
                                 group_label(d.group_name(stack_entry->group), d.group_desc(stack_entry->group)));
    }
    return c;
}

// The node, when the culprits are every rank of one host (two or more).
std::string culprit_node(const HangAnalysis& a) {
    if (a.culprits.size() < 2 || a.culprits[0].host.empty()) return "";
    for (const Culprit& c : a.culprits)
        if (c.host != a.culprits[0].host) return "";
    size_t on_host = 0;
    for (const auto& r : a.ranks) on_host += r.host == a.culprits[0].host;
    return on_host == a.culprits.size() ? a.culprits[0].host : "";
}

// Gaps in op_id between a group's recorded entries: operations the recorder kept no entry for.
void count_unrecorded(const DumpSet& set, HangAnalysis& a) {
    for (const flight::FlightDump& d : set.dumps) {
        std::vector<int64_t> last(d.groups.size(), -1);
        int64_t gaps = 0;
        for (const flight::FlightEntry& e : d.entries) {
            if (last[e.group] >= 0 && e.op_id > last[e.group] + 1) gaps += e.op_id - last[e.group] - 1;
            last[e.group] = e.op_id;
        }
        if (gaps > 0) a.unrecorded_gap_ranks.push_back(d.rank), a.unrecorded_ops += gaps;
        if (gaps > 0 && !d.entries.empty() && d.op_name(d.entries.front()).rfind("gloo:", 0) == 0)
            a.unrecorded_under_gloo = true;
    }
}

// Whether the dumps may have caught a running job (time_created is each process's wall clock, comparable across
// ranks of synchronised hosts): how long the oldest unfinished operation had been open by the job's newest entry,
// and whether the culprits completed an operation begun after the others entered the collective they are said to
// hold (then they were still running: not stuck).
void measure_motion(const DumpSet& set, const std::unordered_map<int, uint32_t>& dump_of_rank, HangAnalysis& a) {
    int64_t newest = -1, oldest_open = -1;
    for (const flight::FlightDump& d : set.dumps)
        for (const flight::FlightEntry& e : d.entries) {
            if (e.time_created_ns <= 0) continue;
            newest = std::max(newest, e.time_created_ns);
            if (!entry_completed(e) && (oldest_open < 0 || e.time_created_ns < oldest_open))
                oldest_open = e.time_created_ns;
        }
    if (newest > 0 && oldest_open > 0) a.longest_open_s = double(newest - oldest_open) / 1e9;
    if (a.group < 0 || a.kind != HangKind::missing) return;
    const int64_t entered = a.groups[size_t(a.group)].entered_ns;
    int64_t culprits_newest = -1;
    for (int r : a.culprit_ranks) {
        const auto it = dump_of_rank.find(r);
        if (it == dump_of_rank.end()) return;  // a rank without a dump: nothing to compare
        // a completed entry only: a culprit stuck in another group's collective made it after, and never finished it
        for (const flight::FlightEntry& e : set.dumps[it->second].entries)
            if (entry_completed(e)) culprits_newest = std::max(culprits_newest, e.time_created_ns);
    }
    if (entered > 0 && culprits_newest > entered) a.culprit_active_after_s = double(culprits_newest - entered) / 1e9;
}

}  // namespace

const char* hang_kind_name(HangKind k) {
    switch (k) {
        case HangKind::none:
            return "none";
        case HangKind::missing:
            return "missing";
        case HangKind::mismatch:
            return "mismatch";
        case HangKind::p2p_deadlock:
            return "p2p_deadlock";
        case HangKind::inside_collective:
            return "inside_collective";
    }
    return "?";
}

HangAnalysis analyze_hang(const DumpSet& set) {
    HangAnalysis a;
    a.left_out = set.left_out;
    std::unordered_map<int, uint32_t> dump_of_rank;
    for (uint32_t i = 0; i < set.dumps.size(); ++i) {
        const flight::FlightDump& d = set.dumps[i];
        dump_of_rank.emplace(d.rank, i);
        a.ranks.push_back({d.rank, d.host, d.source, d.entries.size()});
        a.world = std::max(a.world, d.rank + 1);
        for (const flight::GroupConfig& c : d.pg_config)
            for (int r : c.ranks) a.world = std::max(a.world, r + 1);
        if (!d.injected_fault.empty()) a.injected.push_back(fmt::format("rank {}: {}", d.rank, d.injected_fault));
    }
    for (int r = 0; r < a.world; ++r)
        if (!dump_of_rank.count(r)) a.absent_ranks.push_back(r);
    // of this job's absent ranks only: a stray file of a larger job's rank explains no rank of this one
    for (const int r : set.another_jobs_ranks)
        if (std::binary_search(a.absent_ranks.begin(), a.absent_ranks.end(), r)) a.another_jobs_ranks.push_back(r);

    const AlignedGroups aligned = align_groups(set);
    const CallSignatures signatures(set);
    for (const GroupInstance& g : aligned.groups) a.groups.push_back(judge_group(set, g, signatures, dump_of_rank));
    judge_p2p(set, aligned, a.groups, dump_of_rank);
    mark_roots(a.groups, waiting_group(set, aligned), dump_of_rank);

    a.group = pick_root(a.groups);
    if (a.group >= 0) {
        const GroupState& root = a.groups[size_t(a.group)];
        a.kind = root.kind;
        a.culprit_ranks = root.culprit_ranks;
        a.collective = root.kind == HangKind::mismatch ? root.reference : root.collective;
        if (root.kind == HangKind::mismatch) a.culprit_call = root.collective;
        for (int r : a.culprit_ranks) a.culprits.push_back(describe_culprit(set, dump_of_rank, r, root));
        if (!a.culprits.empty()) a.stack = a.culprits[0].stack;
        if (root.kind == HangKind::mismatch) {
            GroupState probe = root;
            probe.collective = root.reference;
            a.reference_stack = describe_culprit(set, dump_of_rank, root.reference.rank, probe).stack;
        }
    }
    // Ranks without a dump are suspects in their own right; with nothing else wrong, they are the verdict.
    if ((a.kind == HangKind::none || a.kind == HangKind::inside_collective) && !a.absent_ranks.empty() &&
        a.absent_ranks.size() < size_t(a.world)) {
        a.kind = HangKind::missing;
        a.group = -1;
        a.culprit_ranks = a.absent_ranks;
        a.culprits.clear();
        for (int r : a.absent_ranks) a.culprits.push_back(describe_culprit(set, dump_of_rank, r, GroupState{}));
        a.stack.clear();
    }
    count_unrecorded(set, a);
    measure_motion(set, dump_of_rank, a);
    // Two sides of a tie on one host are not that host's fault: the node is named only for culprits of one kind.
    const bool tie = a.group >= 0 && a.groups[size_t(a.group)].tie;
    if (!tie) a.node = culprit_node(a);
    write_verdict(a);
    return a;
}

}  // namespace us::hang
