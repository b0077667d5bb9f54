#include "engine/parallel/expert_parallel.h"
#include "engine/comm/flight_frames.h"

#include <numeric>

#include "profiler/record/zones.h"

namespace us {

ExpertParallel::ExpertParallel(Communicator& ep_group, int experts) : m_group(ep_group), m_experts(experts) {
    US_ASSERT(experts % ep_group.size() == 0, "{} experts over ep {}", experts, ep_group.size());
}

// The row counts: this rank sends, to each rank d, its rows for d's experts (experts are ordered by rank, so those
// rows are contiguous in the expert-ordered buffer); it receives, from each rank s, s's rows for each of its own
// experts. The received rows are ordered [source][local expert]; the experts want [local expert][source].
ExpertExchange::Route ExpertParallel::route(const RoutingPlan& plan, Backend& backend) {
    US_FLIGHT_FRAME("ExpertParallel::route (row counts)", FrameDetail::none);
    const int ep = m_group.size(), L = local_experts();
    Route r;
    std::vector<int32_t> received(size_t(ep) * L);
    {
        US_PROF_OP_NAME(US_PROF_NAME("expert parallel: row counts (all-to-all)"));
        m_group.all_to_all_bytes(plan.counts.data(), size_t(L) * sizeof(int32_t), received.data());
    }
    r.send_counts.assign(size_t(ep), 0);
    r.recv_counts.assign(size_t(ep), 0);
    r.local_counts.assign(size_t(L), 0);
    for (int d = 0; d < ep; ++d)
        for (int j = 0; j < L; ++j) {
            r.send_counts[size_t(d)] += plan.counts[size_t(d * L + j)];
            r.recv_counts[size_t(d)] += received[size_t(d) * L + j];
            r.local_counts[size_t(j)] += received[size_t(d) * L + j];
        }
    r.expert_rows = std::accumulate(r.recv_counts.begin(), r.recv_counts.end(), int64_t(0));
    // to_expert_order[i]: the received row that becomes row i of the local experts' buffer; to_source_order the
    // inverse (row i of the received layout comes from that expert-ordered row).
    std::vector<int32_t> start(size_t(ep) * L);  // received layout: where (source, expert) begins
    int32_t at = 0;
    for (int s = 0; s < ep; ++s)
        for (int j = 0; j < L; ++j) start[size_t(s) * L + j] = at, at += received[size_t(s) * L + j];
    std::vector<int32_t> index(size_t(2 * std::max<int64_t>(r.expert_rows, 1)), 0);
    int32_t i = 0;
    for (int j = 0; j < L; ++j)
        for (int s = 0; s < ep; ++s)
            for (int32_t k = 0; k < received[size_t(s) * L + j]; ++k, ++i) {
                const int32_t from = start[size_t(s) * L + j] + k;
                index[size_t(i)] = from;
                index[size_t(r.expert_rows + from)] = i;
            }
    const int64_t n = std::max<int64_t>(r.expert_rows, 1);
    r.index = backend.allocator().allocate(size_t(2 * n) * sizeof(int32_t), MemCategory::activations,
                                           "expert parallel row order");
    backend.upload(r.index.view(DType::i32, 0, 2 * n), index.data());
    r.to_expert_order = r.index.view(DType::i32, 0, r.expert_rows);
    r.to_source_order = r.index.view(DType::i32, r.expert_rows, r.expert_rows);
    return r;
}

namespace {
std::vector<int> times(const std::vector<int>& rows, int C) {
    std::vector<int> out(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) out[i] = rows[i] * C;
    return out;
}
}  // namespace

void ExpertParallel::to_experts(const Route& r, Tensor token_rows, Tensor expert_rows, Backend& backend, int C) {
    US_FLIGHT_FRAME("ExpertParallel::to_experts (dispatch)", FrameDetail::none);
    const DType e = token_rows.dtype;
    Allocation received = backend.allocator().allocate(size_t(std::max<int64_t>(r.expert_rows, 1) * C) * dtype_size(e),
                                                       MemCategory::comm_buffers, "expert parallel received rows");
    const Tensor in = received.view(e, 0, r.expert_rows * C);
    {
        US_PROF_OP_NAME(US_PROF_NAME("expert parallel: dispatch (all-to-all)"));
        m_group.all_to_allv(token_rows, times(r.send_counts, C), in, times(r.recv_counts, C));
    }
    backend.gather_rows(expert_rows, in, r.to_expert_order, int(r.expert_rows), C);
}

void ExpertParallel::to_tokens(const Route& r, Tensor expert_rows, Tensor token_rows, Backend& backend, int C) {
    US_FLIGHT_FRAME("ExpertParallel::to_tokens (combine)", FrameDetail::none);
    const DType e = expert_rows.dtype;
    Allocation sent = backend.allocator().allocate(size_t(std::max<int64_t>(r.expert_rows, 1) * C) * dtype_size(e),
                                                   MemCategory::comm_buffers, "expert parallel rows to send back");
    const Tensor out = sent.view(e, 0, r.expert_rows * C);
    backend.gather_rows(out, expert_rows, r.to_source_order, int(r.expert_rows), C);
    US_PROF_OP_NAME(US_PROF_NAME("expert parallel: combine (all-to-all)"));
    m_group.all_to_allv(out, times(r.recv_counts, C), token_rows, times(r.send_counts, C));
}

}  // namespace us
