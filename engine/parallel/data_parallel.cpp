#include "engine/parallel/data_parallel.h"

#include <fmt/format.h>

#include "engine/comm/recording_comm.h"
#include "engine/comm/flight_frames.h"

namespace us {

DataParallelSync::DataParallelSync(Communicator& dp, const ParamLayout& layout, double bucket_mb,
                                   size_t grad_bytes_per_element, bool overlap, bool alternate,
                                   const InjectedHang* hang)
    : m_dp(dp),
      m_plan(plan_buckets(layout, bucket_mb, grad_bytes_per_element)),
      m_overlap(overlap),
      m_alternate(alternate && overlap),
      m_hang(hang) {
    m_units_left.resize(m_plan.buckets.size());
    m_bucket_first.resize(m_plan.buckets.size());
    for (size_t b = 0; b < m_plan.buckets.size(); ++b)
        m_units_left[b] = m_plan.buckets[b].last_unit - m_plan.buckets[b].first_unit + 1;
}

void DataParallelSync::unit_ready(int unit, Tensor unit_grads) {
    const int b = m_plan.bucket_of_unit[size_t(unit)];
    if (unit == m_plan.buckets[size_t(b)].first_unit) m_bucket_first[size_t(b)] = unit_grads;
    if (--m_units_left[size_t(b)] > 0) return;
    m_ready_order.push_back(b);
    if (m_overlap) launch(b);
}

// A bucket is contiguous in the flat gradient buffer, starting where its first unit starts.
void DataParallelSync::launch(int b) {
    US_FLIGHT_FRAME("DataParallel::reduce_gradients", FrameDetail::none);
    const Bucket& bucket = m_plan.buckets[size_t(b)];
    const Tensor first = m_bucket_first[size_t(b)];
    if (m_hang && m_hang->fires(HangFault::mismatch)) inject_mismatch(b);
    m_inflight.push_back(m_dp.iall_reduce(Tensor::of(first.data, first.dtype, bucket.numel)));
}

// --hang-kind mismatch: the entry says this rank reduced another tensor (another bucket's size, or one element more
// when every bucket has this size); MPI is not called, since mismatched counts are undefined behaviour.
void DataParallelSync::inject_mismatch(int b) {
    const Bucket& bucket = m_plan.buckets[size_t(b)];
    int64_t other = bucket.numel + 1;
    for (const Bucket& o : m_plan.buckets)
        if (o.numel != bucket.numel) {
            other = o.numel;
            break;
        }
    record_phantom_all_reduce(m_dp, m_bucket_first[size_t(b)].dtype, other);
    m_hang->block(
        fmt::format("records its gradient all-reduce (bucket {}) with {} elements instead of {}, as if it "
                    "reduced another tensor, and waits there; the others wait inside the real one",
                    b, other, bucket.numel));
}

void DataParallelSync::wait_all() {
    if (!m_overlap)
        for (int b : m_ready_order) launch(b);  // after backward, in the same order as overlap would have
    for (auto& h : m_inflight) h->wait();
    m_inflight.clear();
    m_ready_order.clear();
    if (m_alternate) m_overlap = !m_overlap;
    for (size_t b = 0; b < m_plan.buckets.size(); ++b)
        m_units_left[b] = m_plan.buckets[b].last_unit - m_plan.buckets[b].first_unit + 1;
}

}  // namespace us
