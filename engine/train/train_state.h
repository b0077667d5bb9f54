// The training state of one rank: the flat buffers of every category (params, grads, master weights, moments)
// and the optimizer step over them. The model reaches weights and gradients through the ParamAccess side; the
// trainer drives the step through the rest. Implementations: a replicated state (one rank, or data parallel with
// bucketed all-reduce) and the ZeRO states (sharded).
#pragma once

#include <cstdint>

#include "engine/model/gpt_config.h"
#include "engine/model/param_access.h"
#include "engine/model/param_layout.h"

namespace us {

// What a checkpoint reads and writes per tensor, always as fp32.
enum class StateSlot { weights, exp_avg, exp_avg_sq };

class TrainState : public ParamAccess {
public:
    // Sets the initial weights (the same on every rank and layout for a seed).
    virtual void initialize(const GPTConfig& cfg, uint64_t seed) = 0;

    // Around each micro-batch of a step; `last` marks the micro-batch whose backward finishes the gradients
    // (gradient communication happens there).
    virtual void begin_micro_batch(int index, bool last) = 0;
    virtual void end_micro_batch(int index, bool last) = 0;

    // After the last backward: waits for gradient communication and returns this rank's contribution to the
    // squared global gradient norm (its shard, or all of it when replicated and `counts_norm` is set).
    virtual double finish_gradients() = 0;

    virtual void optimizer_step(double lr, float clip_coef) = 0;
    virtual int optimizer_steps_taken() const = 0;
    virtual bool has_optimizer_moments() const = 0;

    // Checkpoint access. holds(): whether this rank stores (its part of) the tensor for the slot.
    virtual void export_tensor(const ParamTensor& t, StateSlot slot, float* out) = 0;
    virtual void import_tensor(const ParamTensor& t, StateSlot slot, const float* in) = 0;
    virtual void set_optimizer_steps(int steps) = 0;
};

}  // namespace us
