// The Ranks view's data (docs/blame.md), from the ranks' digests and the blame made of them: a rank x step heatmap
// of one figure (compute, exposed communication, waiting caused, waiting suffered, bubble, idle, waiting for a core),
// the ranks grouped by a parallel coordinate (the engine's grid) or a process group (an imported trace's), sorted
// within each group, the stragglers and the pipelines' bottleneck stages marked. Digests, not spans: the same for 4
// ranks and 4,096. Measured, all of it.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "profiler/analysis/blame.h"
#include "profiler/analysis/rank_digest.h"

namespace us::gui {

enum class RankFigure { compute, exposed, caused, suffered, bubble, idle, core_wait, worker_core_wait, count };
inline constexpr const char* kRankFigureNames[] = {"compute",           "exposed communication",
                                                   "waiting caused",    "waiting suffered",
                                                   "pipeline bubble",   "idle",
                                                   "waited for a core", "OpenMP workers waited for a core"};
// What each figure means, for the view's tooltip.
inline constexpr const char* kRankFigureHelp[] = {
    "time computing in the step (measured)",
    "communication nothing overlapped: the rank stood waiting for it (measured)",
    "the others' waiting in collectives this rank arrived last in (measured: durations matched across the group)",
    "this rank's waiting in collectives for the last to arrive (measured)",
    "a pipeline stage's idle time between its micro-batches (measured)",
    "time with nothing running (measured)",
    "its trainer thread ready to run with no core free (measured: the kernel's run queue; the rank's own threads and "
    "the machine's other load both take cores: blame weighs it by the time on a core; blank where the trace has no "
    "such counter)",
    "its OpenMP workers (its GEMMs' and loops' other threads) ready to run with no core free, summed over them: at "
    "most what the machine's other load cost it (measured: the kernel's run queue; blank where the trace has no such "
    "counter: one thread computes)"};

enum class RankOrder { rank, value, caused, count };
inline constexpr const char* kRankOrderNames[] = {"rank", "the figure, most first", "waiting caused, most first"};

struct RanksModel {
    std::vector<int> steps;      // the columns
    std::vector<size_t> rows;    // the rows, in order: indices into the digests
    std::vector<float> cells;    // [row * steps.size() + column], seconds; < 0 where the rank lacks the step
    std::vector<double> totals;  // per row: the figure summed over the steps
    float max_value = 0;
    std::vector<size_t> group_starts;  // the rows where a group begins (the first is 0)
    std::vector<std::string> group_labels;
    std::vector<std::string> groupings;  // what the ranks can be grouped by: "" (none), coordinates, process groups
    std::map<int, std::string> marks;    // rank -> "holds the run back", "bottleneck stage 2", ...
    float at(size_t row, size_t column) const { return cells[row * steps.size() + column]; }
};

// `group_by`: "" for none, a coordinate of the grid ("dp", "pp", ...) or "pg NAME" (an imported process group).
RanksModel build_ranks_model(const std::vector<prof::RankDigest>& digests, const prof::Blame& blame, RankFigure figure,
                             const std::string& group_by, RankOrder order);

}  // namespace us::gui
