// A buffer split over a group's ranks as the collectives take it (all-gather, reduce-scatter): each rank's count
// and displacement, in MPI's ints. One rule for the tensor-parallel and context-parallel collectives and the ZeRO
// shards, and a cache, so that a collective of a fixed shape (every layer's, every step) allocates nothing.
#pragma once

#include <cstdint>
#include <vector>

namespace us {

struct EvenSplit {
    int64_t whole = 0;
    int64_t piece = 0;  // ceil(whole / parts): rank r holds [r piece, (r + 1) piece), the last ones shorter or empty
    std::vector<int> counts, displs;
};

// Asserts that `whole` fits MPI's int counts.
EvenSplit even_split(int64_t whole, int parts);

// The splits a group has used, found by size: a run's shapes are fixed, so after the first step none is made.
class EvenSplitCache {
public:
    const EvenSplit& get(int64_t whole, int parts);

private:
    std::vector<EvenSplit> m_splits;  // a handful: linear search
};

}  // namespace us
