// Splits of a buffer over a group's ranks (even_split.h).
#include "engine/comm/even_split.h"

#include <algorithm>

#include "common/core/check.h"

namespace us {

EvenSplit even_split(int64_t whole, int parts) {
    US_ASSERT(parts > 0 && whole >= 0 && whole < (int64_t(1) << 31), "a split of {} elements over {} ranks", whole,
              parts);
    EvenSplit s;
    s.whole = whole;
    s.piece = (whole + parts - 1) / parts;
    s.counts.reserve(size_t(parts)), s.displs.reserve(size_t(parts));
    for (int r = 0; r < parts; ++r) {
        const int64_t begin = std::min(whole, int64_t(r) * s.piece), end = std::min(whole, begin + s.piece);
        s.displs.push_back(int(begin));
        s.counts.push_back(int(end - begin));
    }
    return s;
}

const EvenSplit& EvenSplitCache::get(int64_t whole, int parts) {
    for (const EvenSplit& s : m_splits)
        if (s.whole == whole && int(s.counts.size()) == parts) return s;
    m_splits.push_back(even_split(whole, parts));
    return m_splits.back();
}

}  // namespace us
