#include "engine/model/context_parallel.h"
#include "engine/comm/flight_frames.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>
#include <utility>

#include "profiler/record/zones.h"

namespace us {

namespace {
constexpr int kKvTag = 71, kGradTag = 72;  // ring messages of one communicator, matched in order
}

ContextParallel::ContextParallel(Communicator& cp_group, CpBalance balance, CpComm comm, int seq, Backend& backend)
    : m_group(&cp_group), m_balance(balance), m_comm(comm), m_seq(seq), m_be(&backend) {
    const int cp = cp_group.size();
    m_chunk = seq / (cp * chunks_per_rank());
    US_ASSERT(m_chunk * cp * chunks_per_rank() == seq, "seq {} over cp {}", seq, cp);
    std::vector<int32_t> pos;
    for (int local = 0; local < chunks_per_rank(); ++local)
        for (int i = 0; i < m_chunk; ++i) pos.push_back(int32_t(global_chunk(rank(), local) * m_chunk + i));
    m_positions_storage = backend.allocator().allocate(pos.size() * sizeof(int32_t), MemCategory::workspace,
                                                       "context-parallel positions");
    m_positions = m_positions_storage.view(DType::i32, 0, int64_t(pos.size()));
    backend.upload(m_positions, pos.data());
    for (int owner = 0; owner < cp; ++owner) m_pairs.push_back(cp_chunk_pairs(balance, cp, rank(), owner));
    for (int i = 0; i < cp; ++i)
        m_step_names.push_back(prof::string_id(comm == CpComm::ring ? fmt::format("ring attention step {}", i)
                                               : i == 0             ? std::string("cp attention: own block")
                                                        : fmt::format("cp attention: block of rank - {}", i)));
}

int cp_chunks_per_rank(CpBalance balance) { return balance == CpBalance::zigzag ? 2 : 1; }

int cp_global_chunk(CpBalance balance, int cp, int owner, int local) {
    if (balance == CpBalance::contiguous) return owner;
    return local == 0 ? owner : 2 * cp - 1 - owner;
}

std::vector<AttentionChunkPair> cp_chunk_pairs(CpBalance balance, int cp, int rank, int owner) {
    std::vector<AttentionChunkPair> pairs;
    const int n = cp_chunks_per_rank(balance);
    for (int qc = 0; qc < n; ++qc)
        for (int kc = 0; kc < n; ++kc) {
            const int gq = cp_global_chunk(balance, cp, rank, qc), gk = cp_global_chunk(balance, cp, owner, kc);
            if (gk > gq) continue;  // every key after every query: masked whole, so skipped
            pairs.push_back({qc, kc, gk == gq});
        }
    return pairs;
}

int ContextParallel::global_chunk(int owner, int local) const {
    return cp_global_chunk(m_balance, size(), owner, local);
}

void ContextParallel::take_local(const int32_t* whole, int32_t* local, int B) const {
    const int Tl = local_seq();
    for (int b = 0; b < B; ++b)
        for (int c = 0; c < chunks_per_rank(); ++c)
            std::copy_n(whole + size_t(b) * m_seq + size_t(global_chunk(rank(), c)) * m_chunk, m_chunk,
                        local + size_t(b) * Tl + size_t(c) * m_chunk);
}

// One layer's forward: the queries stay, the key/value blocks go round. At step i the rank holds the block of
// rank - i; while it computes on it, the block moves on to the next rank and the previous rank's arrives.
void ContextParallel::attention_forward(Tensor out, Tensor lse, Tensor qkv, int B, int NH, int HD) {
    US_FLIGHT_FRAME("ContextParallel::attention_forward (ring)", FrameDetail::none);
    if (active() && m_comm == CpComm::allgather) return allgather_forward(out, lse, qkv, B, NH, HD);
    const int cp = size(), me = rank(), Tl = local_seq(), C = NH * HD;
    if (cp == 1) {  // --attention flash on one rank: nothing travels, the keys and values are read in qkv
        const std::vector<AttentionChunkPair>& pairs = pairs_with(0);
        const AttentionBlockArgs a{qkv,          qkv.slice(C, qkv.numel - C), B,    Tl, NH, HD, m_chunk,
                                   pairs.data(), int(pairs.size()),           3 * C};
        m_be->attention_whole_forward(a, out, lse);
        return;
    }
    const int next = (me + 1) % cp, prev = (me + cp - 1) % cp;
    TrackedAllocator& alloc = m_be->allocator();
    const DType e = qkv.dtype;
    const int64_t block = int64_t(B) * Tl * 2 * C;
    // A ring: two key/value blocks, its communication buffers.
    Allocation buffers = alloc.allocate(size_t(2 * block) * dtype_size(e), MemCategory::comm_buffers,
                                        "ring attention key/value blocks (current, next)");
    Tensor cur = buffers.view(e, 0, block), nxt = buffers.view(e, block, block);
    // The online softmax's running state: an output accumulator, and per row its maximum and sum (a zero sum
    // means nothing merged yet).
    const int64_t rows = int64_t(B) * NH * Tl;
    Allocation state = alloc.allocate(size_t(int64_t(B) * Tl * C + 2 * rows) * 4, MemCategory::temporaries,
                                      "ring attention softmax state");
    const Tensor acc = state.view(DType::f32, 0, int64_t(B) * Tl * C);
    const Tensor row_max = state.view(DType::f32, int64_t(B) * Tl * C, rows);
    const Tensor row_sum = state.view(DType::f32, int64_t(B) * Tl * C + rows, rows);
    m_be->fill_zero(state.view(DType::f32, 0, int64_t(B) * Tl * C + 2 * rows));
    m_be->attention_block_pack_kv(cur, qkv, B, Tl, C);
    for (int i = 0; i < cp; ++i) {
        CommHandle sent, received;
        if (i < cp - 1) {  // the next block travels while this one is computed
            US_PROF_OP_NAME(US_PROF_NAME("ring attention: key/value block"));
            std::tie(sent, received) = m_group->isend_recv(cur, next, nxt, prev, kKvTag);
        }
        const std::vector<AttentionChunkPair>& pairs = pairs_with((me - i + cp) % cp);
        if (!pairs.empty()) {
            US_PROF_OP_NAME(m_step_names[size_t(i)]);
            AttentionBlockArgs a{qkv, cur, B, Tl, NH, HD, m_chunk, pairs.data(), int(pairs.size())};
            m_be->attention_block_forward(a, acc, row_max, row_sum);
        }
        if (i < cp - 1) {
            sent->wait();
            received->wait();
            std::swap(cur, nxt);
        }
    }
    m_be->attention_block_finish(out, lse, acc, row_max, row_sum, B, Tl, NH, HD);
}

// One layer's backward. At step i the rank holds the key/value block of rank - i (it travels as in forward) and
// computes its queries' share of that block's key and value gradients; that share is added to the partial sum the
// previous rank sends (the other ranks' shares so far) and sent on, so the block's owner receives the whole of it
// after cp steps. The query gradients stay on the rank.
void ContextParallel::attention_backward(Tensor dqkv, Tensor dout, Tensor out, Tensor lse, Tensor qkv, int B, int NH,
                                         int HD) {
    US_FLIGHT_FRAME("ContextParallel::attention_backward (ring)", FrameDetail::none);
    if (active() && m_comm == CpComm::allgather) return allgather_backward(dqkv, dout, out, lse, qkv, B, NH, HD);
    const int cp = size(), me = rank(), Tl = local_seq(), C = NH * HD;
    const int next = (me + 1) % cp, prev = (me + cp - 1) % cp;
    TrackedAllocator& alloc = m_be->allocator();
    const DType e = qkv.dtype;
    const int64_t block = int64_t(B) * Tl * 2 * C, grads = block;  // fp32 gradient blocks of the same shape
    const int64_t rows = int64_t(B) * NH * Tl;
    if (cp == 1) {  // --attention flash on one rank: nothing travels, k and v read in qkv
        const std::vector<AttentionChunkPair>& pairs = pairs_with(0);
        const AttentionBlockArgs a{qkv,          qkv.slice(C, qkv.numel - C), B,    Tl, NH, HD, m_chunk,
                                   pairs.data(), int(pairs.size()),           3 * C};
        m_be->attention_whole_backward(a, dqkv, dout, out, lse);
        return;
    }
    Allocation kv_buffers = alloc.allocate(size_t(2 * block) * dtype_size(e), MemCategory::comm_buffers,
                                           "ring attention key/value blocks (current, next)");
    Tensor cur = kv_buffers.view(e, 0, block), nxt = kv_buffers.view(e, block, block);
    // Partial key/value gradients: two being accumulated and sent, two being received.
    Allocation grad_buffers =
        alloc.allocate(size_t(4 * grads) * 4, MemCategory::comm_buffers, "ring attention key/value gradient blocks");
    Tensor mine[2] = {grad_buffers.view(DType::f32, 0, grads), grad_buffers.view(DType::f32, grads, grads)};
    Tensor incoming[2] = {grad_buffers.view(DType::f32, 2 * grads, grads),
                          grad_buffers.view(DType::f32, 3 * grads, grads)};
    Allocation state = alloc.allocate(size_t(int64_t(B) * Tl * C + rows) * 4, MemCategory::temporaries,
                                      "ring attention query gradients");
    const Tensor dq = state.view(DType::f32, 0, int64_t(B) * Tl * C);
    const Tensor delta = state.view(DType::f32, int64_t(B) * Tl * C, rows);
    m_be->fill_zero(dq);
    m_be->attention_block_delta(delta, dout, out, B, Tl, NH, HD);
    m_be->attention_block_pack_kv(cur, qkv, B, Tl, C);

    CommHandle grad_sent[2], grad_received[2];
    for (int i = 0; i < cp; ++i) {
        CommHandle kv_sent, kv_received;
        if (i < cp - 1) {
            US_PROF_OP_NAME(US_PROF_NAME("ring attention: key/value block"));
            std::tie(kv_sent, kv_received) = m_group->isend_recv(cur, next, nxt, prev, kKvTag);
        }
        Tensor contribution = mine[i % 2];
        if (grad_sent[i % 2]) grad_sent[i % 2]->wait();  // sent from this buffer two steps ago
        m_be->fill_zero(contribution);
        const std::vector<AttentionChunkPair>& pairs = pairs_with((me - i + cp) % cp);
        if (!pairs.empty()) {
            US_PROF_OP_NAME(m_step_names[size_t(i)]);
            AttentionBlockArgs a{qkv, cur, B, Tl, NH, HD, m_chunk, pairs.data(), int(pairs.size())};
            m_be->attention_block_backward(a, dq, contribution, dout, lse, delta);
        }
        if (i > 0) {  // the shares of the ranks that held this block before, sent at the end of their last step
            grad_received[i % 2]->wait();
            m_be->accumulate(contribution, incoming[i % 2]);
        }
        {  // on to the next holder; in comes the partial of the block held next (at the last step: this rank's own)
            US_PROF_OP_NAME(US_PROF_NAME("ring attention: key/value gradient block"));
            std::tie(grad_sent[i % 2], grad_received[(i + 1) % 2]) =
                m_group->isend_recv(contribution, next, incoming[(i + 1) % 2], prev, kGradTag);
        }
        if (i < cp - 1) {
            kv_sent->wait();
            kv_received->wait();
            std::swap(cur, nxt);
        }
    }
    grad_received[cp % 2]->wait();  // this rank's own keys and values, every rank's share summed
    for (auto& h : grad_sent)
        if (h) h->wait();
    m_be->attention_block_store_grads(dqkv, dq, incoming[cp % 2], B, Tl, C);
}

LocalSequenceBatches::LocalSequenceBatches(BatchSource& whole, const ContextParallel& cp, int micro_batch, int seq)
    : m_whole(&whole),
      m_cp(cp),
      m_B(micro_batch),
      m_tokens(size_t(micro_batch) * seq),
      m_targets(size_t(micro_batch) * seq) {}

void LocalSequenceBatches::fill(int64_t step, int micro_batch, int32_t* tokens, int32_t* targets) {
    m_whole->fill(step, micro_batch, m_tokens.data(), m_targets.data());
    m_cp.take_local(m_tokens.data(), tokens, m_B);
    m_cp.take_local(m_targets.data(), targets, m_B);
}

}  // namespace us
