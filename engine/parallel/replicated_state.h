// Every rank holds all parameters, gradients and optimizer state: a single rank, or plain data parallelism
// (ZeRO stage 0). Gradients accumulate in one flat buffer across micro-batches; on the last micro-batch each
// unit's gradient is handed to the GradientSync (if any) the moment backward completes it, so bucketed
// all-reduces overlap the rest of backward.
#pragma once

#include <memory>

#include "engine/backend/backend.h"
#include "engine/comm/communicator.h"
#include "engine/optim/adamw.h"
#include "engine/parallel/train_state.h"

namespace us {

// Data parallelism's side of gradient accumulation: told when a unit's gradient is final, waited on before the
// optimizer step. Implemented in parallel/data_parallel.
class GradientSync {
public:
    virtual ~GradientSync() = default;
    virtual void unit_ready(int unit, Tensor unit_grads) = 0;
    virtual void wait_all() = 0;
};

class ReplicatedState final : public TrainState {
public:
    ReplicatedState(Backend& backend, const ParamLayout& layout, Precision precision, bool fp32_grad_accum,
                    const AdamWConfig& adamw, GradientSync* sync);

    Tensor weights(int unit) override;
    Tensor grads(int unit) override;
    void grads_done(int unit) override;

    void initialize(const GPTConfig& cfg, uint64_t seed) override;
    void begin_step() override;
    void begin_backward(int micro_batch, bool last) override;
    void finish_gradients() override;
    void sync_tied_embedding(Communicator& group) override;
    double local_grad_sumsq(bool include_embedding, bool include_tp_replicated) override;
    std::vector<Tensor> grad_pieces(const ParamTensor& t) override;
    bool sharded() const override { return false; }
    void set_norm_owner(bool owner) override { m_norm_owner = owner; }
    void optimizer_step(double lr, float clip_coef) override;
    int optimizer_steps_taken() const override { return m_adamw->step_count(); }
    bool has_optimizer_moments() const override { return m_adamw->has_moments(); }
    void export_tensor(const ParamTensor& t, StateSlot slot, float* out) override;
    void import_tensor(const ParamTensor& t, StateSlot slot, const float* in) override;
    void set_optimizer_steps(int steps) override { m_adamw->set_step_count(steps); }

    Tensor params() const { return m_params_tensor; }
    Tensor grads_buffer() const { return m_grads_tensor; }  // empty until the first backward
    Tensor grads_for_optimizer() const { return m_accum32 ? m_accum32_tensor : m_grads_tensor; }

private:
    void ensure_grads();
    Tensor unit_slice(Tensor flat, int unit) const;

    Backend& m_be;
    const ParamLayout& m_layout;
    Precision m_precision;
    bool m_fp32_grad_accum;
    GradientSync* m_sync;
    Allocation m_params, m_grads, m_accum32;
    Tensor m_params_tensor, m_grads_tensor, m_accum32_tensor;
    std::unique_ptr<AdamW> m_adamw;
    bool m_last_micro_batch = true;
    bool m_zero_pending = false;  // zero the gradients at the next backward (the step's first)
    bool m_norm_owner = true;
};

// Writes fp32 values into a tensor of any floating dtype through host memory (rounding to bf16 when needed).
void upload_converted(Backend& backend, Tensor dst, const float* values);
// Reads a tensor of any floating dtype into fp32 host memory.
void download_converted(Backend& backend, float* values, Tensor src);

}  // namespace us
