// The training state of one rank: the flat buffers of every category (params, grads, master weights, moments)
// and the optimizer step over them. The model reaches weights and gradients through the ParamAccess side; the
// trainer drives the step through the rest. Implementations: a replicated state (one rank, or data parallel with
// bucketed all-reduce) and the ZeRO states (sharded).
#pragma once

#include <cstdint>
#include <vector>

#include "common/settings/gpt_config.h"
#include "engine/model/param_access.h"
#include "engine/model/param_layout.h"

namespace us {

// What a checkpoint reads and writes per tensor, always as fp32.
enum class StateSlot { weights, exp_avg, exp_avg_sq };

class TrainState : public ParamAccess {
public:
    // Sets the initial weights (the same on every rank and layout for a seed).
    virtual void initialize(const GPTConfig& cfg, uint64_t seed) = 0;

    // At the start of a step, before any backward (gradients are zeroed or left to be zeroed).
    virtual void begin_step() = 0;
    // Before each backward (and each W of a split backward) of a chunk: `last` marks its last micro-batch of the
    // step, whose backward finishes the chunk's gradients (gradient communication starts there).
    virtual void begin_backward(int micro_batch, bool last) = 0;
    // After the step's last backward: waits for the gradient communication to finish.
    virtual void finish_gradients() = 0;
    // Sums the embedding's gradient over `group` (the first and last pipeline stages, which both hold the tied
    // embedding). Only on ranks that hold the embedding.
    virtual void sync_tied_embedding(class Communicator& group) = 0;
    // This rank's share of the squared global gradient norm: all of its gradients (replicated) or its shard
    // (ZeRO), without the embedding when include_embedding is false (the pipeline's second copy of it) and without
    // the tensors replicated over the tensor-parallel group when include_tp_replicated is false (another tp rank
    // counts them).
    virtual double local_grad_sumsq(bool include_embedding, bool include_tp_replicated = true) = 0;
    // After finish_gradients: where tensor t's gradient lives on this rank for the optimizer (all of it when
    // replicated, the pieces of its shard under ZeRO; none when the shard holds none of it).
    virtual std::vector<Tensor> grad_pieces(const ParamTensor& t) = 0;
    // Whether local_grad_sumsq covers only a shard (the trainer then sums over the data-parallel ranks too).
    virtual bool sharded() const = 0;
    // For a state replicated over its reduction group: whether this rank's copy counts in the global gradient norm
    // (one rank of the group's copies does; the trainer sums every rank's share over the world). A shard is always
    // this rank's own.
    virtual void set_norm_owner(bool) {}

    virtual void optimizer_step(double lr, float clip_coef) = 0;
    virtual int optimizer_steps_taken() const = 0;
    virtual bool has_optimizer_moments() const = 0;

    // Checkpoint access. holds(): whether this rank stores (its part of) the tensor for the slot.
    virtual void export_tensor(const ParamTensor& t, StateSlot slot, float* out) = 0;
    virtual void import_tensor(const ParamTensor& t, StateSlot slot, const float* in) = 0;
    virtual void set_optimizer_steps(int steps) = 0;
};

}  // namespace us
