// Judging one process group (group_verdict.h). Members are walked side by side over the window of sequence numbers
// they all hold; calls are compared by signature (op, sizes, dtypes), and a mismatch is judged by the majority, so
// the reference is never simply whichever rank's file came first.
#include "profiler/hang/group_verdict.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "profiler/hang/collective_call.h"
#include "profiler/hang/hang_verdict_text.h"

namespace us::hang {
namespace {

struct Member {
    const flight::FlightDump* dump;
    uint32_t dump_index;
    const std::vector<uint32_t>* collectives;
    size_t cursor = 0;
    const flight::FlightEntry& entry(size_t i) const { return dump->entries[(*collectives)[i]]; }
};

// The earliest time a member entered the group's divergence: which of two hangs of the same ranks came first.
void note_entered(GroupState& s, const flight::FlightEntry& e) {
    if (e.time_created_ns > 0 && (s.entered_ns < 0 || e.time_created_ns < s.entered_ns))
        s.entered_ns = e.time_created_ns;
}

void progress_of(GroupState& s, const std::vector<Member>& members) {
    for (const Member& m : members) {
        MemberProgress p;
        p.rank = m.dump->rank;
        if (!m.collectives->empty()) {
            p.first_seq = m.entry(0).collective_seq_id;
            p.last_entered = m.entry(m.collectives->size() - 1).collective_seq_id;
            for (size_t i = m.collectives->size(); i-- > 0;)
                if (entry_completed(m.entry(i))) {
                    p.last_completed = m.entry(i).collective_seq_id;
                    break;
                }
        }
        s.members.push_back(p);
    }
}

// The member's entry of collective `seq`, or null (walks forward: seq only grows).
const flight::FlightEntry* entry_at(Member& m, int64_t seq) {
    while (m.cursor < m.collectives->size() && m.entry(m.cursor).collective_seq_id < seq) ++m.cursor;
    if (m.cursor < m.collectives->size() && m.entry(m.cursor).collective_seq_id == seq) return &m.entry(m.cursor);
    return nullptr;
}

// The smallest collective number after `seq` that a member holds at or beyond its cursor; nullopt when none does.
// The window is walked by the numbers the dumps hold, never number by number: a dump's numbers can be far apart (a
// corrupt or hostile file: 0 and 2^62 once took the walk forever).
std::optional<int64_t> next_seq(const std::vector<Member>& members, int64_t seq) {
    std::optional<int64_t> next;
    for (const Member& m : members)
        for (size_t i = m.cursor; i < m.collectives->size(); ++i)
            if (const int64_t id = m.entry(i).collective_seq_id; id > seq) {
                if (!next || id < *next) next = id;
                break;
            }
    return next;
}

// The first collective of the window where members call different things: true, with the state filled.
bool find_mismatch(GroupState& s, std::vector<Member>& members, const CallSignatures& signatures) {
    std::vector<uint64_t> sig(members.size());
    std::vector<const flight::FlightEntry*> at(members.size());
    for (std::optional<int64_t> seq = s.window_first; seq && *seq <= s.window_last; seq = next_seq(members, *seq)) {
        bool differs = false;
        for (size_t i = 0; i < members.size(); ++i) {
            at[i] = entry_at(members[i], *seq);
            sig[i] = at[i] ? signatures.of(members[i].dump_index, *at[i]) : 0;
            if (at[i] && at[0] && sig[i] != sig[0]) differs = true;
        }
        if (!differs) continue;
        // The majority's call is the reference; a tie takes the group's first member's as the one the text compares
        // against, says so, and names both sides.
        std::unordered_map<uint64_t, int> count;
        for (size_t i = 0; i < members.size(); ++i)
            if (at[i]) ++count[sig[i]];
        uint64_t best = sig[0];
        int best_n = 0, ties = 0;
        for (const auto& [k, n] : count) {
            if (n > best_n)
                best = k, best_n = n, ties = 0;
            else if (n == best_n)
                ++ties;
        }
        if (ties > 0) best = at[0] ? sig[0] : best;
        size_t reference = members.size();
        for (size_t i = 0; i < members.size(); ++i) {
            if (!at[i]) continue;
            if (sig[i] == best && reference == members.size()) reference = i;
            if (sig[i] != best) s.culprit_ranks.push_back(members[i].dump->rank);
        }
        const size_t culprit = std::find_if(members.begin(), members.end(),
                                            [&](const Member& m) { return m.dump->rank == s.culprit_ranks[0]; }) -
                               members.begin();
        for (size_t i = 0; i < members.size(); ++i)
            if (at[i]) note_entered(s, *at[i]);
        s.kind = HangKind::mismatch;
        s.collective = call_of(*members[culprit].dump, *at[culprit]);
        s.reference = call_of(*members[reference].dump, *at[reference]);
        std::vector<int> agreeing;
        for (size_t i = 0; i < members.size(); ++i)
            if (at[i] && sig[i] == best) agreeing.push_back(members[i].dump->rank);
        s.detail =
            fmt::format("{} called {} {} where {} called {} {}{}", rank_list(s.culprit_ranks), s.collective.op,
                        shapes_label(s.collective), rank_list(agreeing), s.reference.op, shapes_label(s.reference),
                        ties > 0 ? " (no majority: either side may be the wrong one)" : "");
        // No majority: nothing says which side is wrong, so both are suspects (a tie of two members must not blame
        // whichever came second).
        if (ties > 0) {
            s.tie = true;
            s.culprit_ranks.insert(s.culprit_ranks.end(), agreeing.begin(), agreeing.end());
            std::sort(s.culprit_ranks.begin(), s.culprit_ranks.end());
        }
        return true;
    }
    return false;
}

// Members whose buffers hold every entry of their process and none of the group's collectives, where the others
// entered some: they never entered the group's first, the one the others' buffers hold first.
GroupState& never_entered_group(GroupState& s, std::vector<Member>& members, const std::vector<int>& never) {
    const Member* first = &members.front();
    for (const Member& m : members)
        if (m.entry(0).collective_seq_id < first->entry(0).collective_seq_id) first = &m;
    s.kind = HangKind::missing;
    s.culprit_ranks = never;
    s.collective = call_of(*first->dump, first->entry(0));
    s.window_first = s.window_last = s.collective.seq_id;
    std::vector<int> entered;
    for (const Member& m : members) {
        entered.push_back(m.dump->rank);
        note_entered(s, m.entry(0));
    }
    s.detail = fmt::format(
        "{} entered {}; {} never entered any collective of the group (the buffer holds every "
        "entry of {} process)",
        rank_list(entered), call_label(s.collective), rank_list(never), never.size() == 1 ? "its" : "their");
    return s;
}

}  // namespace

GroupState judge_group(const DumpSet& set, const GroupInstance& group, const CallSignatures& signatures,
                       const std::unordered_map<int, uint32_t>& dump_of_rank) {
    GroupState s;
    s.name = group.name;
    s.desc = group.desc;
    std::vector<Member> members;
    for (const MemberEntries& m : group.members) {
        members.push_back({&set.dumps[m.dump], m.dump, &m.collectives});
        s.ranks.push_back(set.dumps[m.dump].rank);
    }
    if (!group.config_ranks.empty()) {
        s.ranks = group.config_ranks;
        s.ranks_from_config = true;
        for (int r : group.config_ranks)
            if (!dump_of_rank.count(r)) s.absent_ranks.push_back(r);
    }
    progress_of(s, members);
    // A member that holds none of the group's collectives while others entered some never entered the group's first,
    // where its buffer still holds its process's first entry (nothing wrapped away: record id 0, or no entry at all).
    // Otherwise its buffer says nothing of the group (p2p only, or wrapped away).
    // The config's members with a dump but no entry of the group are not among `members` at all.
    const bool others_entered =
        std::any_of(members.begin(), members.end(), [](const Member& m) { return !m.collectives->empty(); });
    std::vector<int> never_entered;
    auto whole = [](const flight::FlightDump& d) { return d.entries.empty() || d.entries.front().record_id == 0; };
    for (const Member& m : members)
        if (others_entered && m.collectives->empty() && whole(*m.dump)) never_entered.push_back(m.dump->rank);
    for (const int r : group.config_ranks) {
        const auto dump = dump_of_rank.find(r);
        const bool member =
            std::any_of(members.begin(), members.end(), [&](const Member& m) { return m.dump->rank == r; });
        if (others_entered && dump != dump_of_rank.end() && !member && whole(set.dumps[dump->second]))
            never_entered.push_back(r);
    }
    std::sort(never_entered.begin(), never_entered.end());
    std::erase_if(members, [](const Member& m) { return m.collectives->empty(); });
    if (members.empty()) return s;
    if (!never_entered.empty()) return never_entered_group(s, members, never_entered);
    int64_t lo = INT64_MIN, hi_min = INT64_MAX, hi_max = INT64_MIN;
    for (const Member& m : members) {
        lo = std::max(lo, m.entry(0).collective_seq_id);
        hi_min = std::min(hi_min, m.entry(m.collectives->size() - 1).collective_seq_id);
        hi_max = std::max(hi_max, m.entry(m.collectives->size() - 1).collective_seq_id);
    }
    s.window_first = lo;
    s.window_last = hi_min;
    if (lo <= hi_min && find_mismatch(s, members, signatures)) return s;
    if (hi_min < hi_max) {
        // Missing: the members furthest behind never entered the next collective the others did.
        const Member* ahead = nullptr;
        for (const Member& m : members) {
            const int64_t last = m.entry(m.collectives->size() - 1).collective_seq_id;
            if (last == hi_min)
                s.culprit_ranks.push_back(m.dump->rank);
            else if (!ahead)
                ahead = &m;
        }
        s.kind = HangKind::missing;
        Member probe = *ahead;
        probe.cursor = 0;
        const flight::FlightEntry* next = entry_at(probe, hi_min + 1);
        if (next) {
            s.collective = call_of(*ahead->dump, *next);
        } else {
            s.collective.seq_id = hi_min + 1;  // the others' buffers no longer hold it
        }
        std::vector<int> waiting;
        for (Member& m : members) {
            if (m.entry(m.collectives->size() - 1).collective_seq_id <= hi_min) continue;
            waiting.push_back(m.dump->rank);
            m.cursor = 0;
            if (const flight::FlightEntry* e = entry_at(m, hi_min + 1)) note_entered(s, *e);
        }
        s.detail = fmt::format("{} entered {} and {}; {} never did (the last {} entered: #{})", rank_list(waiting),
                               call_label(s.collective), waiting.size() == 1 ? "waits" : "wait",
                               rank_list(s.culprit_ranks), s.culprit_ranks.size() == 1 ? "it" : "they", hi_min);
        if (!s.absent_ranks.empty()) s.detail += fmt::format("; {} left no dump", rank_list(s.absent_ranks));
        return s;
    }
    // Everyone entered the newest collective: inside it, or all done.
    std::vector<const flight::FlightEntry*> last;
    for (const Member& m : members) last.push_back(&m.entry(m.collectives->size() - 1));
    const bool all_done = std::all_of(last.begin(), last.end(), [](auto* e) { return entry_completed(*e); });
    if (all_done) return s;
    s.kind = HangKind::inside_collective;
    s.collective = call_of(*members[0].dump, *last[0]);
    for (const flight::FlightEntry* e : last) note_entered(s, *e);
    // Who arrived last (the host started late): the discovered start where recorded, else the creation time.
    size_t late = 0, early = 0;
    auto arrived = [&](size_t i) {
        return last[i]->time_started_ns >= 0 ? last[i]->time_started_ns : last[i]->time_created_ns;
    };
    for (size_t i = 1; i < last.size(); ++i) {
        if (arrived(i) > arrived(late)) late = i;
        if (arrived(i) < arrived(early)) early = i;
    }
    const double spread_s = double(arrived(late) - arrived(early)) * 1e-9;
    if (!s.absent_ranks.empty()) {  // the members that dumped wait inside it: those that did not hold them
        s.kind = HangKind::missing;
        s.culprit_ranks = s.absent_ranks;
        std::vector<int> present;
        for (const Member& m : members) present.push_back(m.dump->rank);
        s.detail = fmt::format(
            "{} entered {} and {} in it; {} left no dump (never entered it, or died or hung "
            "before {} could dump)",
            rank_list(present), call_label(s.collective), present.size() == 1 ? "waits" : "wait",
            rank_list(s.absent_ranks), s.absent_ranks.size() == 1 ? "it" : "they");
        return s;
    }
    s.detail = fmt::format(
        "{} {} members entered {} and none left it: not a desync (a slow or broken link, or the "
        "communication library)",
        members.size() == s.ranks.size() ? "all" : "the", members.size(), call_label(s.collective));
    if (spread_s >= 1.0) {
        s.culprit_ranks.push_back(members[late].dump->rank);
        s.late_entry_s = spread_s;
        s.detail += fmt::format("; rank {} entered it {:.1f} s after the first", members[late].dump->rank, spread_s);
    }
    return s;
}

}  // namespace us::hang
