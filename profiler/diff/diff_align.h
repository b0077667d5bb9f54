// How two runs are lined up (docs/diff.md), never by timestamp: ranks by their grid coordinates where both runs
// know them, else by rank number; steps by their index within the steady steps (run_figures.h averages them);
// ops by name and op class (the digests carry no shapes; the engine's names say the layer part and the phase).
// What has no partner is listed, so the diff says what it could not match.
#pragma once

#include <string>
#include <vector>

#include "profiler/diff/run_figures.h"

namespace us::prof {

struct RankPair {
    size_t a = 0, b = 0;  // into RunFigures::ranks
};

struct RankAlignment {
    std::vector<RankPair> pairs;
    std::vector<int> a_only, b_only;  // rank numbers without a partner
    std::string by;                   // "grid coordinates", "rank"
};

RankAlignment align_ranks(const RunFigures& a, const RunFigures& b);

enum class OpMatch { both, new_in_b, gone_from_a, unknown };
inline constexpr const char* kOpMatchNames[] = {"moved", "new", "gone", "unmatched"};

struct AlignedOp {
    std::string name;
    OpClass op = OpClass::none;
    ComputeKind kind = ComputeKind::other;
    double a_s = 0, b_s = 0;  // per steady step, the ranks' mean (0 where the run has none)
    OpMatch match = OpMatch::both;
    double delta_s() const { return b_s - a_s; }
};

// Every op of either run. An op in only one run is new (or gone) when the other run's op tables are whole in its
// digests; else it may sit below the other's leading rows, and is unknown.
std::vector<AlignedOp> align_ops(const RunFigures& a, const RunFigures& b);

}  // namespace us::prof
