#include "profiler/analysis/intervals.h"

#include <algorithm>

namespace us::prof {

std::vector<Interval> union_of(std::vector<Interval> in, int64_t lo, int64_t hi) {
    std::vector<Interval> out;
    for (auto& [b, e] : in) {
        b = std::max(b, lo);
        e = std::min(e, hi);
    }
    std::erase_if(in, [](const Interval& i) { return i.second <= i.first; });
    std::sort(in.begin(), in.end());
    for (const auto& i : in) {
        if (!out.empty() && i.first <= out.back().second)
            out.back().second = std::max(out.back().second, i.second);
        else
            out.push_back(i);
    }
    return out;
}

int64_t total_length(const std::vector<Interval>& merged) {
    int64_t t = 0;
    for (const auto& [b, e] : merged) t += e - b;
    return t;
}

int64_t intersection_length(const std::vector<Interval>& a, const std::vector<Interval>& b) {
    int64_t t = 0;
    size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
        const int64_t lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
        if (hi > lo) t += hi - lo;
        if (a[i].second < b[j].second)
            ++i;
        else
            ++j;
    }
    return t;
}

std::vector<Interval> clip(const std::vector<Interval>& merged, int64_t lo, int64_t hi) {
    std::vector<Interval> out;
    auto it = std::upper_bound(merged.begin(), merged.end(), lo,
                               [](int64_t t, const Interval& i) { return t < i.second; });  // first ending after lo
    for (; it != merged.end() && it->first < hi; ++it)
        out.emplace_back(std::max(it->first, lo), std::min(it->second, hi));
    return out;
}

std::vector<Interval> subtract(const std::vector<Interval>& a, const std::vector<Interval>& b) {
    std::vector<Interval> out;
    size_t j = 0;
    for (auto [lo, hi] : a) {
        while (j < b.size() && b[j].second <= lo) ++j;  // B's intervals wholly before this one
        for (size_t k = j; k < b.size() && b[k].first < hi; ++k) {
            if (b[k].first > lo) out.emplace_back(lo, b[k].first);
            lo = std::max(lo, b[k].second);
        }
        if (hi > lo) out.emplace_back(lo, hi);
    }
    return out;
}

}  // namespace us::prof
