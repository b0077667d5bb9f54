// --cp-comm allgather: context parallelism as Llama 3 runs it (Dubey et al. 2024, section 3.3.2). Each layer gathers
// every rank's key/value block before its attention, computes the rank's queries against them, and in backward
// gathers them again, computes every block's share of the key/value gradients and reduce-scatters them to their
// owners. Nothing overlaps: the transfers are on the critical path, where the ring hides its behind the attention.
#include <climits>
#include "engine/comm/flight_frames.h"
#include <vector>

#include "engine/model/context_parallel.h"
#include "profiler/record/zones.h"

namespace us {

namespace {

// Every rank's keys and values, packed (B, Tl, 2C) per rank, rank r's at block r.
void gather_kv(Communicator& group, Backend& be, const EvenSplit& pieces, Tensor gathered, Tensor qkv, int64_t block,
               int B, int Tl, int C) {
    be.attention_block_pack_kv(gathered.slice(group.rank() * block, block), qkv, B, Tl, C);
    US_PROF_OP_NAME(US_PROF_NAME("cp all-gather: keys and values"));
    group.all_gather(gathered, pieces.counts, pieces.displs);
}

}  // namespace

template <class Visit>
void ContextParallel::visit_gathered(Tensor qkv, Tensor gathered, int B, int NH, int HD, Visit visit) const {
    const int cp = size(), me = rank();
    const int64_t block = gathered.numel / cp;
    for (int i = 0; i < cp; ++i) {
        const int owner = (me - i + cp) % cp;
        const std::vector<AttentionChunkPair>& pairs = pairs_with(owner);
        if (pairs.empty()) continue;
        US_PROF_OP_NAME(m_step_names[size_t(i)]);
        visit(owner, AttentionBlockArgs{qkv, gathered.slice(owner * block, block), B, local_seq(), NH, HD, m_chunk,
                                        pairs.data(), int(pairs.size())});
    }
}

// The blocks are merged in the ring's order (the rank's own first, then rank - 1, rank - 2, ...), so the online
// softmax sees the same sequence of partial results as the ring's and the output is the ring's bit for bit.
void ContextParallel::allgather_forward(Tensor out, Tensor lse, Tensor qkv, int B, int NH, int HD) {
    US_FLIGHT_FRAME("ContextParallel::allgather_forward", FrameDetail::none);
    const int cp = size(), Tl = local_seq(), C = NH * HD;
    TrackedAllocator& alloc = m_be->allocator();
    const int64_t block = int64_t(B) * Tl * 2 * C;
    const Allocation buffers = alloc.allocate(size_t(cp * block) * dtype_size(qkv.dtype), MemCategory::comm_buffers,
                                              "cp all-gather: every rank's keys and values");
    const Tensor gathered = buffers.view(qkv.dtype, 0, cp * block);
    const int64_t rows = int64_t(B) * NH * Tl;
    const Allocation state = alloc.allocate(size_t(int64_t(B) * Tl * C + 2 * rows) * 4, MemCategory::temporaries,
                                            "blockwise attention softmax state");
    const Tensor acc = state.view(DType::f32, 0, int64_t(B) * Tl * C);
    const Tensor row_max = state.view(DType::f32, int64_t(B) * Tl * C, rows);
    const Tensor row_sum = state.view(DType::f32, int64_t(B) * Tl * C + rows, rows);
    m_be->fill_zero(state.view(DType::f32, 0, int64_t(B) * Tl * C + 2 * rows));
    gather_kv(*m_group, *m_be, m_splits.get(cp * block, cp), gathered, qkv, block, B, Tl, C);
    visit_gathered(qkv, gathered, B, NH, HD,
                   [&](int, const AttentionBlockArgs& a) { m_be->attention_block_forward(a, acc, row_max, row_sum); });
    m_be->attention_block_finish(out, lse, acc, row_max, row_sum, B, Tl, NH, HD);
}

// Backward: the keys and values gathered again (forward gave its copy back: holding every layer's would cost cp
// times the keys and values of the whole stage), each owner's share of its gradients computed into its own fp32
// block, and the blocks reduce-scattered so that every rank receives the sum for its own keys and values. The
// gathered keys and values are given back before the reduce-scatter: the layer's peak is cp blocks of each.
void ContextParallel::allgather_backward(Tensor dqkv, Tensor dout, Tensor out, Tensor lse, Tensor qkv, int B, int NH,
                                         int HD) {
    US_FLIGHT_FRAME("ContextParallel::allgather_backward", FrameDetail::none);
    const int cp = size(), Tl = local_seq(), C = NH * HD;
    TrackedAllocator& alloc = m_be->allocator();
    const int64_t block = int64_t(B) * Tl * 2 * C, rows = int64_t(B) * NH * Tl;
    const Allocation share_buffers = alloc.allocate(size_t(cp * block) * 4, MemCategory::comm_buffers,
                                                    "cp reduce-scatter: every block's key/value gradient share");
    const Tensor shares = share_buffers.view(DType::f32, 0, cp * block);
    const Allocation state = alloc.allocate(size_t(int64_t(B) * Tl * C + rows) * 4, MemCategory::temporaries,
                                            "blockwise attention query gradients");
    const Tensor dq = state.view(DType::f32, 0, int64_t(B) * Tl * C);
    const Tensor delta = state.view(DType::f32, int64_t(B) * Tl * C, rows);
    m_be->fill_zero(dq);
    m_be->fill_zero(shares);
    m_be->attention_block_delta(delta, dout, out, B, Tl, NH, HD);
    {
        const Allocation kv_buffers =
            alloc.allocate(size_t(cp * block) * dtype_size(qkv.dtype), MemCategory::comm_buffers,
                           "cp all-gather: every rank's keys and values");
        const Tensor gathered = kv_buffers.view(qkv.dtype, 0, cp * block);
        gather_kv(*m_group, *m_be, m_splits.get(cp * block, cp), gathered, qkv, block, B, Tl, C);
        visit_gathered(qkv, gathered, B, NH, HD, [&](int owner, const AttentionBlockArgs& a) {
            m_be->attention_block_backward(a, dq, shares.slice(owner * block, block), dout, lse, delta);
        });
    }
    const Allocation own_buffer =
        alloc.allocate(size_t(block) * 4, MemCategory::comm_buffers, "cp reduce-scatter: own key/value gradients");
    const Tensor own = own_buffer.view(DType::f32, 0, block);
    {
        const EvenSplit& pieces = m_splits.get(cp * block, cp);
        US_PROF_OP_NAME(US_PROF_NAME("cp reduce-scatter: key/value gradients"));
        m_group->reduce_scatter(shares, own, pieces.counts, pieces.displs);
    }
    m_be->attention_block_store_grads(dqkv, dq, own, B, Tl, C);
}

}  // namespace us
