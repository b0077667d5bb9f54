// Context parallelism: ring attention (Liu et al. 2023, "Ring Attention with Blockwise Transformers for
// Near-Infinite Context"; Megatron-LM's and Transformer Engine's context parallelism). The sequence is split over
// the cp group; every layer but attention works on the rank's own positions. Attention keeps the rank's queries and
// passes key/value blocks around the ring in cp - 1 steps (the next block is received while the current one is
// computed), merging the blocks' partial softmaxes with the online log-sum-exp correction. Backward passes the
// key/value blocks around again, each with the partial gradient of its keys and values, which arrives back at its
// owner complete after cp steps.
//
// --cp-comm allgather (Llama 3's context parallelism, Dubey et al. 2024, section 3.3.2): each layer all-gathers every
// rank's keys and values before its attention and reduce-scatters their gradients after its backward: no overlap, the
// whole sequence's keys and values held for the layer, simpler than the ring and cheap beside the attention of long
// sequences with grouped-query attention. The same block kernels in the ring's order: its forward is the ring's bit
// for bit; the key/value gradients are summed by the reduce-scatter instead of along the ring.
//
// Causal load balance: with --cp-balance zigzag (the default, as Megatron and Transformer Engine do) the sequence
// is cut into 2 cp chunks and rank r holds chunks r and 2 cp - 1 - r, so every rank has the same causal work; with
// contiguous rank r holds chunk r of cp, and the last rank, whose queries see every key, does the most (for
// teaching). Chunk pairs entirely above the causal diagonal are skipped, not computed and masked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/settings/parallel_layout.h"
#include "engine/backend/backend.h"
#include "engine/comm/communicator.h"
#include "engine/comm/even_split.h"
#include "engine/data/data_loader.h"

namespace us {

// The layout as pure functions (tested alone): a rank's chunks (1 contiguous, 2 zigzag) and their global indices,
// and the chunk pairs a rank computes against the key/value block of `owner` (pairs whose keys all come after
// their queries are left out; diagonal pairs are causal).
int cp_chunks_per_rank(CpBalance balance);
int cp_global_chunk(CpBalance balance, int cp, int owner, int local);
std::vector<AttentionChunkPair> cp_chunk_pairs(CpBalance balance, int cp, int rank, int owner);

class ContextParallel {
public:
    ContextParallel() = default;  // cp = 1
    ContextParallel(Communicator& cp_group, CpBalance balance, CpComm comm, int seq, Backend& backend);

    int size() const { return m_group ? m_group->size() : 1; }
    int rank() const { return m_group ? m_group->rank() : 0; }
    bool active() const { return size() > 1; }
    Communicator* group() const { return m_group; }
    int local_seq() const { return m_seq / size(); }
    int chunk_rows() const { return m_chunk; }
    // The global chunk index of chunk `local` (0, or 0 and 1 under zigzag) of `owner`'s rows.
    int global_chunk(int owner, int local) const;
    // (local_seq) i32 in backend memory: each local row's position in the sequence (RoPE); empty when inactive.
    Tensor positions() const { return m_positions; }

    // The rank's rows of a (B, T) micro-batch of token ids.
    void take_local(const int32_t* whole, int32_t* local, int B) const;

    // Attention of one layer over the cp group (the ring, or the all-gather). Forward: out (B,Tl,C) and lse (B,NH,Tl)
    // fp32 from qkv (B,Tl,3C) (q and k after RoPE at their global positions). Backward: dqkv (B,Tl,3C) from dout
    // (B,Tl,C).
    void attention_forward(Tensor out, Tensor lse, Tensor qkv, int B, int NH, int HD);
    void attention_backward(Tensor dqkv, Tensor dout, Tensor out, Tensor lse, Tensor qkv, int B, int NH, int HD);

    // The chunk pairs this rank computes against the key/value block of `owner` (the causal ones, diagonal pairs
    // flagged): what makes the zigzag balance visible. Fixed by the layout, worked out once.
    const std::vector<AttentionChunkPair>& pairs_with(int owner) const { return m_pairs.at(size_t(owner)); }

private:
    int chunks_per_rank() const { return cp_chunks_per_rank(m_balance); }
    // --cp-comm allgather (context_parallel_allgather.cpp).
    void allgather_forward(Tensor out, Tensor lse, Tensor qkv, int B, int NH, int HD);
    void allgather_backward(Tensor dqkv, Tensor dout, Tensor out, Tensor lse, Tensor qkv, int B, int NH, int HD);
    // Calls visit(owner, args) for each gathered block with chunk pairs, in the ring's order (the rank's own first,
    // then rank - 1, ...), under its step's profiler name.
    template <class Visit>
    void visit_gathered(Tensor qkv, Tensor gathered, int B, int NH, int HD, Visit visit) const;

    Communicator* m_group = nullptr;
    CpBalance m_balance = CpBalance::zigzag;
    CpComm m_comm = CpComm::ring;
    int m_seq = 0, m_chunk = 0;
    Backend* m_be = nullptr;
    Allocation m_positions_storage;
    Tensor m_positions;
    std::vector<uint32_t> m_step_names;                    // profiler names "ring attention step i"
    std::vector<std::vector<AttentionChunkPair>> m_pairs;  // per owner: pairs_with
    EvenSplitCache m_splits;                               // --cp-comm allgather's pieces, one size per layout
};

// A BatchSource that reads whole micro-batches from another one and hands on the rank's rows of each sequence.
class LocalSequenceBatches final : public BatchSource {
public:
    LocalSequenceBatches(BatchSource& whole, const ContextParallel& cp, int micro_batch, int seq);
    void fill(int64_t step, int micro_batch, int32_t* tokens, int32_t* targets) override;
    void set_source(BatchSource& whole) { m_whole = &whole; }

private:
    BatchSource* m_whole;
    const ContextParallel& m_cp;
    int m_B;
    std::vector<int32_t> m_tokens, m_targets;
};

}  // namespace us
