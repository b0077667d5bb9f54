// The Hang view's data (docs/hangs.md), from a hung job's Flight Recorder dumps and their analysis: the groups to
// pick from (hung first, roots before their victims), and for the picked group a grid of its members x its last
// collectives by sequence id, each cell the state the member's dump records. Members that look alike fold into one
// band ("ranks 0-1023 (1024): completed through #41, waiting in #42"), so 4,096 ranks read as a few rows. Measured,
// all of it: every cell is an entry of a dump, or its absence.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "profiler/hang/hang_analysis.h"

namespace us::gui {

// A member's entry of one collective: none (no entry, or no dump at all), not held (older than anything its ring
// buffer still holds of the group: wrapped away, says nothing), only scheduled (gloo never says more until it
// retires an entry), started, completed (or retired).
enum class HangCell : uint8_t { absent, not_held, scheduled, started, completed, count };
inline constexpr const char* kHangCellNames[] = {"absent", "not held", "only scheduled", "started", "completed"};
inline constexpr const char* kHangCellHelp[] = {
    "no entry of this collective in the rank's dump, or no dump of the rank at all",
    "older than anything the rank's ring buffer still holds of this group (wrapped away: it says nothing)",
    "recorded but not seen to start (gloo records only this until an entry retires)",
    "started and not seen to complete", "completed (or retired: the recorder saw it complete and moved on)"};

// A group as the selector offers it: hung groups first, roots before their victims, then those that agree.
struct HangGroupChoice {
    int group = -1;     // index in HangAnalysis::groups
    std::string label;  // "group 't0' (tp), 4 ranks: missing, the root"
};
std::vector<HangGroupChoice> hang_group_choices(const hang::HangAnalysis& a);
// The group the view opens on: the root of the verdict, else the first hung group, else the first (-1: none).
int default_hang_group(const hang::HangAnalysis& a);

// Members of the group that look alike (the same cells, progress and role) folded into one row.
struct HangBand {
    std::vector<int> ranks;  // ascending
    std::string label;       // "rank 7", "ranks 0-6, 8-1023 (1023)"
    std::string progress;    // "completed through #41, waiting in #42"
    bool culprit = false;    // the group's culprits (or ranks without a dump that the group misses)
    bool absent = false;     // no dump
};

struct HangGrid {
    int group = -1;
    std::vector<int64_t> seqs;     // the columns: the group's collective sequence ids, ascending
    std::vector<std::string> ops;  // per column, the op most members recorded ("all_reduce"; "" for none)
    std::vector<HangBand> bands;   // ordered by their first rank
    std::vector<HangCell> cells;   // [band * seqs.size() + column]
    int divergence = -1;           // the column of the group's first divergence (-1: none shown)
    size_t members = 0;            // the group's ranks (the bands' ranks together)
    HangCell at(size_t band, size_t column) const { return cells[band * seqs.size() + column]; }
};

// The grid of `group` (an index in a.groups): its last `columns` collectives, around the divergence where there is
// one (up to two past it). `set` is the dumps the analysis was made of.
HangGrid build_hang_grid(const hang::HangAnalysis& a, const hang::DumpSet& set, int group, int columns = 12);

// "0-6, 8-1023": ascending ranks as ranges, at most `max_ranges` of them ("..." after).
std::string rank_ranges(const std::vector<int>& ranks, size_t max_ranges = 4);
// "rank 7", "ranks 0-6, 8-1023 (1023)".
std::string band_label(const std::vector<int>& ranks);

// What `rank` recorded for collective `seq` of `group` (the call resolved to text), for a cell's tooltip.
std::optional<hang::CollectiveCall> hang_call_at(const hang::HangAnalysis& a, const hang::DumpSet& set, int group,
                                                 int rank, int64_t seq);

}  // namespace us::gui
