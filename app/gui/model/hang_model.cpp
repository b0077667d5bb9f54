// The Hang view's groups, grid and bands (hang_model.h). Cells are read from the dumps themselves (the analysis
// says where the group diverged and who is to blame; the dumps say what each member recorded); a member's row is
// keyed by its cells, its progress and its role, and members with the same key share a band.
#include "app/gui/model/hang_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "profiler/hang/collective_call.h"
#include "profiler/hang/hang_verdict_text.h"

namespace us::gui {

namespace {

const char* kind_words(hang::HangKind k) {
    switch (k) {
        case hang::HangKind::none:
            return "agrees";
        case hang::HangKind::missing:
            return "members missing";
        case hang::HangKind::mismatch:
            return "mismatch";
        case hang::HangKind::p2p_deadlock:
            return "p2p deadlock";
        case hang::HangKind::inside_collective:
            return "all inside one collective";
    }
    return "";
}

// The dump of `rank` (the set is in rank order), or null.
const flight::FlightDump* dump_of(const hang::DumpSet& set, int rank) {
    const auto it = std::lower_bound(set.dumps.begin(), set.dumps.end(), rank,
                                     [](const flight::FlightDump& d, int r) { return d.rank < r; });
    return it != set.dumps.end() && it->rank == rank ? &*it : nullptr;
}

// The dump's own index of the group instance (name, desc), or -1: group ids are interned per dump.
int group_in(const flight::FlightDump& d, const hang::GroupState& g) {
    for (size_t i = 0; i < d.groups.size(); ++i)
        if (d.group_name(uint32_t(i)) == g.name && d.group_desc(uint32_t(i)) == g.desc) return int(i);
    return -1;
}

std::string progress_text(const hang::MemberProgress* p) {
    if (!p) return "no dump";
    if (p->first_seq < 0) return "no collective of this group in its buffer";
    if (p->last_entered == p->last_completed) return fmt::format("completed through #{}", p->last_completed);
    if (p->last_completed < 0) return fmt::format("waiting in #{} (no completed one held)", p->last_entered);
    if (p->last_entered == p->last_completed + 1)
        return fmt::format("completed through #{}, waiting in #{}", p->last_completed, p->last_entered);
    return fmt::format("completed through #{}, entered up to #{}", p->last_completed, p->last_entered);
}

// One member's row: its cells over [seqs.front(), seqs.back()] and each column's op (counted into `ops`).
std::vector<HangCell> cells_of(const flight::FlightDump* d, const hang::GroupState& g, const std::vector<int64_t>& seqs,
                               std::vector<std::map<std::string, int>>& ops) {
    std::vector<HangCell> row(seqs.size(), HangCell::absent);
    if (!d || seqs.empty()) return row;
    const int gi = group_in(*d, g);
    if (gi < 0) return row;
    int64_t first_held = INT64_MAX;
    for (const flight::FlightEntry& e : d->entries) {
        if (e.group != uint32_t(gi) || e.is_p2p) continue;
        first_held = std::min(first_held, e.collective_seq_id);
        if (e.collective_seq_id < seqs.front() || e.collective_seq_id > seqs.back()) continue;
        const size_t c = size_t(e.collective_seq_id - seqs.front());
        row[c] = hang::entry_completed(e)                 ? HangCell::completed
                 : e.state == flight::EntryState::started ? HangCell::started
                                                          : HangCell::scheduled;
        ++ops[c][std::string(flight::op_short_name(d->op_name(e)))];
    }
    for (size_t c = 0; c < seqs.size() && seqs[c] < first_held; ++c) row[c] = HangCell::not_held;
    return row;
}

// The columns: the group's newest `columns` collectives, ending at most two past the divergence.
std::vector<int64_t> columns_of(const hang::GroupState& g, int columns) {
    int64_t lo = INT64_MAX, hi = -1;
    for (const hang::MemberProgress& p : g.members) {
        if (p.first_seq >= 0) lo = std::min(lo, p.first_seq);
        hi = std::max(hi, p.last_entered);
    }
    if (hi < 0 || lo == INT64_MAX) return {};
    const int64_t div = g.collective.p2p ? -1 : g.collective.seq_id;
    if (div >= 0) hi = std::max(div, std::min(hi, div + 2));
    std::vector<int64_t> seqs;
    for (int64_t s = std::max(lo, hi - columns + 1); s <= hi; ++s) seqs.push_back(s);
    return seqs;
}

bool holds(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

std::vector<HangGroupChoice> hang_group_choices(const hang::HangAnalysis& a) {
    std::vector<int> order;
    for (size_t i = 0; i < a.groups.size(); ++i) order.push_back(int(i));
    auto rank_of = [&](int i) {  // hung roots, hung victims, the rest
        const hang::GroupState& g = a.groups[size_t(i)];
        return g.kind == hang::HangKind::none ? 2 : g.root || g.held_by < 0 ? 0 : 1;
    };
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return rank_of(x) < rank_of(y); });
    std::vector<HangGroupChoice> out;
    for (int i : order) {
        const hang::GroupState& g = a.groups[size_t(i)];
        std::string role;
        if (g.kind != hang::HangKind::none && g.root) role = ", the root";
        if (g.kind != hang::HangKind::none && g.held_by >= 0)
            role = ", held by " + hang::group_label(a.groups[size_t(g.held_by)]);
        out.push_back({i, fmt::format("{}, {} rank{}: {}{}", hang::group_label(g), g.ranks.size(),
                                      g.ranks.size() == 1 ? "" : "s", kind_words(g.kind), role)});
    }
    return out;
}

int default_hang_group(const hang::HangAnalysis& a) {
    if (a.group >= 0) return a.group;
    const std::vector<HangGroupChoice> choices = hang_group_choices(a);
    return choices.empty() ? -1 : choices.front().group;
}

std::string rank_ranges(const std::vector<int>& ranks, size_t max_ranges) {
    std::string out;
    size_t shown = 0;
    for (size_t i = 0; i < ranks.size();) {
        size_t j = i;
        while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
        if (shown == max_ranges) return out + ", ...";
        out +=
            (out.empty() ? "" : ", ") + (j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]));
        ++shown;
        i = j + 1;
    }
    return out;
}

std::string band_label(const std::vector<int>& ranks) {
    if (ranks.size() == 1) return fmt::format("rank {}", ranks[0]);
    return fmt::format("ranks {} ({})", rank_ranges(ranks), ranks.size());
}

HangGrid build_hang_grid(const hang::HangAnalysis& a, const hang::DumpSet& set, int group, int columns) {
    HangGrid grid;
    if (group < 0 || size_t(group) >= a.groups.size()) return grid;
    const hang::GroupState& g = a.groups[size_t(group)];
    grid.group = group;
    grid.seqs = columns_of(g, columns);
    const int64_t div = g.collective.p2p ? -1 : g.collective.seq_id;
    for (size_t c = 0; c < grid.seqs.size(); ++c)
        if (grid.seqs[c] == div) grid.divergence = int(c);
    std::unordered_map<int, const hang::MemberProgress*> progress;
    for (const hang::MemberProgress& p : g.members) progress[p.rank] = &p;
    std::vector<int> ranks = g.ranks;
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    grid.members = ranks.size();
    std::vector<std::map<std::string, int>> ops(grid.seqs.size());
    std::unordered_map<std::string, size_t> band_of;  // a row's key -> its band
    for (int rank : ranks) {
        const flight::FlightDump* d = dump_of(set, rank);
        const auto p = progress.find(rank);
        HangBand row;
        row.absent = !d;
        row.culprit = holds(g.culprit_ranks, rank);
        row.progress = d ? progress_text(p == progress.end() ? nullptr : p->second) : progress_text(nullptr);
        const std::vector<HangCell> cells = cells_of(d, g, grid.seqs, ops);
        std::string key;
        for (HangCell c : cells) key += char('0' + int(c));
        key += fmt::format("|{}|{}{}", row.progress, row.absent, row.culprit);
        auto [it, added] = band_of.try_emplace(key, grid.bands.size());
        if (added) {
            grid.bands.push_back(std::move(row));
            grid.cells.insert(grid.cells.end(), cells.begin(), cells.end());
        }
        grid.bands[it->second].ranks.push_back(rank);
    }
    for (HangBand& b : grid.bands) b.label = band_label(b.ranks);
    for (const auto& counts : ops) {
        std::string best;
        int most = 0;
        for (const auto& [op, n] : counts)
            if (n > most) best = op, most = n;
        grid.ops.push_back(best);
    }
    return grid;
}

std::optional<hang::CollectiveCall> hang_call_at(const hang::HangAnalysis& a, const hang::DumpSet& set, int group,
                                                 int rank, int64_t seq) {
    if (group < 0 || size_t(group) >= a.groups.size()) return std::nullopt;
    const flight::FlightDump* d = dump_of(set, rank);
    if (!d) return std::nullopt;
    const int gi = group_in(*d, a.groups[size_t(group)]);
    for (const flight::FlightEntry& e : d->entries)
        if (gi >= 0 && e.group == uint32_t(gi) && !e.is_p2p && e.collective_seq_id == seq) return hang::call_of(*d, e);
    return std::nullopt;
}

}  // namespace us::gui
