#include "engine/parallel/buckets.h"

#include <algorithm>

#include "common/core/check.h"
#include "engine/comm/even_split.h"

namespace us {

BucketPlan plan_buckets(const ParamLayout& layout, double bucket_mb, size_t bytes_per_element, bool isolate_embedding) {
    BucketPlan plan;
    const auto& units = layout.units();
    const int64_t target = int64_t(bucket_mb * 1024 * 1024 / double(bytes_per_element));
    plan.bucket_of_unit.assign(units.size(), -1);
    // Which chunk a unit belongs to (the embedding and final norm go with the chunks next to them).
    std::vector<int> chunk_of(units.size(), 0);
    for (size_t u = 0, c = 0; u < units.size(); ++u) {
        while (units[u].kind == UnitKind::block && c + 1 < layout.chunks().size() &&
               units[u].layer >= layout.chunks()[c].second)
            ++c;
        chunk_of[u] = int(c);
    }
    auto apart = [&](int a, int b) {  // units that must not share a bucket
        if (chunk_of[size_t(a)] != chunk_of[size_t(b)]) return true;
        return isolate_embedding && (a == layout.embedding_unit() || b == layout.embedding_unit());
    };
    std::vector<Bucket> reversed;
    int u = int(units.size()) - 1;
    while (u >= 0) {
        Bucket b;
        b.last_unit = u;
        int64_t n = units[size_t(u--)].numel;
        while (u >= 0 && n < target && !apart(u, u + 1)) n += units[size_t(u--)].numel;
        b.first_unit = u + 1;
        b.offset = units[size_t(b.first_unit)].offset;
        b.numel = n;
        reversed.push_back(b);
    }
    plan.buckets.assign(reversed.rbegin(), reversed.rend());
    for (int b = 0; b < int(plan.buckets.size()); ++b)
        for (int k = plan.buckets[size_t(b)].first_unit; k <= plan.buckets[size_t(b)].last_unit; ++k)
            plan.bucket_of_unit[size_t(k)] = b;
    return plan;
}

ShardSplit split_evenly(int64_t n, int ranks) {
    EvenSplit s = even_split(n, ranks);  // the collectives' one rule (engine/comm/even_split.h)
    return {s.piece, std::move(s.counts), std::move(s.displs)};
}

}  // namespace us
