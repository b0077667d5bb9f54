// Tensor parallelism (Shoeybi et al. 2019, "Megatron-LM: Training Multi-Billion Parameter Language Models Using
// Model Parallelism") and sequence parallelism (Korthikanti et al. 2022, "Reducing Activation Recomputation in
// Large Transformer Models"): the communication of the tensor-parallel group, named as Megatron names it. The
// model splits c_attn and c_fc by output columns (column-parallel: each rank computes its heads and its share of
// the MLP) and both c_proj by input rows (row-parallel: each rank's product is a partial sum). Each mapping is a
// forward/backward pair around those linears:
//
//   copy_to_tp_region            forward: identity         backward: all-reduce      input of a column-parallel
//   reduce_from_tp_region        forward: all-reduce       backward: identity        output of a row-parallel
// and with sequence parallelism, where LayerNorms and residuals hold N/tp of the token rows:
//   gather_from_sp_region        forward: all-gather       backward: reduce-scatter  input of a column-parallel
//   reduce_scatter_to_sp_region  forward: reduce-scatter   backward: all-gather      output of a row-parallel
//
// Every mapping is a no-op when tp = 1, and all of them block: nothing in this engine computes while they run,
// so tensor-parallel communication sits on the critical path (docs/tensor-parallel.md). The model calls these,
// so they live beside it; the step's sum of the replicated gradients under SP is
// engine/parallel/sp_replicated_grads.h.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/comm/communicator.h"
#include "engine/comm/even_split.h"

namespace us {

class TensorParallel {
public:
    TensorParallel() = default;  // tp = 1: every mapping is a no-op
    // `backend` copies a rank's rows into place for the all-gathers (device memory on a GPU).
    TensorParallel(Communicator& tp_group, bool sequence_parallel, Backend& backend);

    int size() const { return m_group ? m_group->size() : 1; }
    int rank() const { return m_group ? m_group->rank() : 0; }
    bool active() const { return size() > 1; }
    bool sp() const { return m_sp && active(); }
    Communicator* group() const { return m_group; }

    // ---- the Megatron mappings. Row tensors are (N/tp, C) shards of a whole (N, C) tensor: rank r holds rows
    // [r N/tp, (r + 1) N/tp) (the token rows of the micro-batch, B*T flattened).
    void copy_to_tp_region_backward(Tensor dx);                              // all-reduce in place
    void reduce_from_tp_region_forward(Tensor x);                            // all-reduce in place
    void gather_from_sp_region_forward(Tensor whole, Tensor rows);           // all-gather rows into whole
    void gather_from_sp_region_backward(Tensor drows, Tensor dwhole);        // reduce-scatter dwhole into drows
    void reduce_scatter_to_sp_region_forward(Tensor rows, Tensor whole);     // reduce-scatter whole into rows
    void reduce_scatter_to_sp_region_backward(Tensor dwhole, Tensor drows);  // all-gather drows into dwhole

    // ---- what the model calls: the right mapping for the mode, returning the tensor to go on with.
    // The input of a column-parallel linear, (N,C): `rows` itself, or all-gathered into `whole` under SP.
    Tensor column_input_forward(Tensor rows, Tensor whole);
    // Its backward: the ranks' partial input gradients (N,C) summed in place, or summed and scattered into
    // `drows` under SP. Returns the gradient of `rows`.
    Tensor column_input_backward(Tensor dwhole, Tensor drows);
    // The output of a row-parallel linear: the ranks' partial products (N,C) summed in place into `partial` (then
    // `rows` is `partial`), or summed and scattered into `rows` under SP.
    void row_output_forward(Tensor partial, Tensor rows);
    // Its backward: the gradient of the whole output, (N,C): `drows` itself, or all-gathered into `dwhole`.
    Tensor row_output_backward(Tensor drows, Tensor dwhole);

    // ---- the vocabulary-parallel cross-entropy's reductions of per-token statistics (fp32)
    void all_reduce_max(Tensor t);
    void all_reduce_sum(Tensor t);

private:
    // A sequence-parallel collective's pieces: every layer's have the same few sizes, made once (even_split.h).
    const EvenSplit& split(int64_t whole);
    EvenSplitCache m_splits;

    Communicator* m_group = nullptr;
    bool m_sp = false;
    Backend* m_be = nullptr;
};

}  // namespace us
