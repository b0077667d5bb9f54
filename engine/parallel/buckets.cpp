#include "engine/parallel/buckets.h"

#include <algorithm>

#include "engine/core/check.h"

namespace us {

BucketPlan plan_buckets(const ParamLayout& layout, double bucket_mb, size_t bytes_per_element) {
    BucketPlan plan;
    const auto& units = layout.units();
    const int64_t target = int64_t(bucket_mb * 1024 * 1024 / double(bytes_per_element));
    plan.bucket_of_unit.assign(units.size(), -1);
    std::vector<Bucket> reversed;
    int u = int(units.size()) - 1;
    while (u >= 0) {
        Bucket b;
        b.last_unit = u;
        int64_t n = 0;
        while (u >= 0 && (n == 0 || n < target)) n += units[size_t(u--)].numel;
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
    US_ASSERT(n < (int64_t(1) << 31), "bucket of {} elements exceeds MPI counts", n);
    ShardSplit s;
    s.piece = (n + ranks - 1) / ranks;
    for (int r = 0; r < ranks; ++r) {
        const int64_t begin = std::min(n, int64_t(r) * s.piece), end = std::min(n, begin + s.piece);
        s.displs.push_back(int(begin));
        s.counts.push_back(int(end - begin));
    }
    return s;
}

}  // namespace us
