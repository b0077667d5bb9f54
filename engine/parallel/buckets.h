// Gradient buckets: consecutive parameter units grouped, from the last unit backward (the order backward finishes
// them), until a bucket holds at least --bucket-mb. Data parallelism all-reduces a bucket as soon as its last unit
// is done; ZeRO reduce-scatters buckets, shards its state by bucket, and ZeRO-3 gathers a bucket's parameters
// before use (as FSDP wraps modules into units). A bucket is never smaller than one unit (a block, the
// embedding, the final norm).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/param_layout.h"

namespace us {

struct Bucket {
    int first_unit = 0;  // forward order, inclusive
    int last_unit = 0;
    int64_t offset = 0;  // in the flat layout
    int64_t numel = 0;
};

struct BucketPlan {
    std::vector<Bucket> buckets;  // in forward order (bucket 0 holds unit 0)
    std::vector<int> bucket_of_unit;
};

// Buckets never span two chunks of an interleaved layout; with `isolate_embedding` (pipelines, whose first and last
// stages both hold the tied embedding) the embedding is a bucket of its own, so both stages split it alike.
BucketPlan plan_buckets(const ParamLayout& layout, double bucket_mb, size_t bytes_per_element,
                        bool isolate_embedding = false);

// How a bucket of n elements is shared by `ranks`: rank r owns [displs[r], displs[r] + counts[r]), pieces of
// ceil(n / ranks) with the last ones shorter or empty.
struct ShardSplit {
    int64_t piece = 0;  // ceil(n / ranks): the padded piece length each rank stores
    std::vector<int> counts, displs;
};
ShardSplit split_evenly(int64_t n, int ranks);

}  // namespace us
