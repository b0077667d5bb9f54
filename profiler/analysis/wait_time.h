// Waits inside collectives as time (blame.h): a rank that has several collectives outstanding at once (buckets
// issued during the backward, then waited for together) waits through the same seconds in each, so its waits are
// merged, never summed, before they are called "seconds waited". Each wait is the first `wait` of its part
// (collective_match.h); the records are merged per key (the victim, or the victim and the rank it waited for, ...).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "profiler/analysis/intervals.h"

namespace us::prof {

// One rank's wait in one collective for the rank that arrived last.
struct WaitRecord {
    int victim = 0, culprit = 0, step = 0;
    uint32_t instance = 0;  // the group instance (CollectiveMatches::instances)
    Interval when;          // [the victim's arrival, + its wait), ns
};

// Seconds of wait per key: the records of one key merged as intervals. `key_of(record)` gives the key.
template <class Key, class KeyOf>
std::map<Key, double> merged_seconds(std::vector<WaitRecord> records, KeyOf key_of) {
    std::sort(records.begin(), records.end(), [&](const WaitRecord& a, const WaitRecord& b) {
        const Key ka = key_of(a), kb = key_of(b);
        return ka < kb || (!(kb < ka) && a.when.first < b.when.first);
    });
    std::map<Key, double> out;
    for (size_t i = 0; i < records.size();) {
        const Key key = key_of(records[i]);
        int64_t covered_to = INT64_MIN, ns = 0;
        for (; i < records.size() && !(key < key_of(records[i])); ++i) {
            const auto [begin, end] = records[i].when;
            if (end > covered_to) ns += end - std::max(begin, covered_to), covered_to = end;
        }
        out[key] += double(ns) / 1e9;
    }
    return out;
}

}  // namespace us::prof
