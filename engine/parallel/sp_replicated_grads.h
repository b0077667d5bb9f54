// Sequence parallelism's last gradient step: the gradients of the replicated parameters (LayerNorms, the
// row-parallel biases) are partial sums over each rank's token rows. Part of the training state's step, not
// of the model's mappings (engine/model/tensor_parallel.h), so it sits with the states it reads.
#pragma once

#include "engine/backend/backend.h"
#include "engine/model/param_layout.h"
#include "engine/model/tensor_parallel.h"
#include "engine/parallel/train_state.h"

namespace us {

// Sums those gradients over the tp group, in one coalesced all-reduce, after the data-parallel reduction (the
// sum is linear, so the order does not matter). A no-op without SP, where every rank sees every row and
// computes the whole gradient itself.
void all_reduce_sp_replicated_grads(TensorParallel& tp, TrainState& state, const ParamLayout& layout, Backend& backend);

}  // namespace us
