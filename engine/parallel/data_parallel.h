// Data parallelism (Li et al. 2020, "PyTorch Distributed: Experiences on Accelerating Data Parallel Training"):
// every rank holds the whole model and its own shard of the batch; gradients are summed over the dp group in
// buckets. With overlap (the default) a bucket's all-reduce starts as soon as backward has finished its last unit,
// so it runs while backward computes the units below; --no-overlap waits for backward to finish and then reduces
// every bucket, to show the difference. Gradient accumulation defers all of it to the last micro-batch.
// --overlap-alternate overlaps in every other step only (the first overlapped), so that one run, its steps side by
// side on one machine, measures how much slower compute runs beside the buckets (ultrascope calibrate --nodes).
#pragma once

#include <vector>

#include "engine/comm/communicator.h"
#include "engine/parallel/buckets.h"
#include "engine/parallel/injected_hang.h"
#include "engine/parallel/replicated_state.h"

namespace us {

class DataParallelSync final : public GradientSync {
public:
    DataParallelSync(Communicator& dp, const ParamLayout& layout, double bucket_mb, size_t grad_bytes_per_element,
                     bool overlap, bool alternate = false, const InjectedHang* hang = nullptr);
    void unit_ready(int unit, Tensor unit_grads) override;
    void wait_all() override;
    const BucketPlan& plan() const { return m_plan; }

private:
    void launch(int bucket);
    [[noreturn]] void inject_mismatch(int bucket);

    Communicator& m_dp;
    BucketPlan m_plan;
    bool m_overlap;
    bool m_alternate;
    std::vector<int> m_units_left;       // per bucket, units not yet ready this step
    std::vector<Tensor> m_bucket_first;  // per bucket, the grads of its first unit (the bucket starts there)
    std::vector<int> m_ready_order;      // buckets in the order they completed
    std::vector<CommHandle> m_inflight;
    const InjectedHang* m_hang;  // --hang-kind mismatch fires in launch()
};

}  // namespace us
