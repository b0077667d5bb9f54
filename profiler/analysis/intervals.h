// Interval arithmetic for the overlap analysis: unions of spans, and the length of the intersection of two
// unions, all clipped to a window. Linear in the number of intervals once they are sorted.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace us::prof {

using Interval = std::pair<int64_t, int64_t>;  // [begin, end)

// Sorts and merges overlapping or touching intervals, clipped to [lo, hi).
std::vector<Interval> union_of(std::vector<Interval> intervals, int64_t lo, int64_t hi);
int64_t total_length(const std::vector<Interval>& merged);
// |A ∩ B| for two merged (sorted, disjoint) unions.
int64_t intersection_length(const std::vector<Interval>& a, const std::vector<Interval>& b);
// The part of a merged union inside [lo, hi), found by binary search (no sort): a step's slice of a whole run's union.
std::vector<Interval> clip(const std::vector<Interval>& merged, int64_t lo, int64_t hi);
// A \ B for two merged unions: the parts of A that no interval of B covers (merged).
std::vector<Interval> subtract(const std::vector<Interval>& a, const std::vector<Interval>& b);

}  // namespace us::prof
