// The training state of a model with experts: the blocks' parameters (everything but the experts) in one state,
// reduced over the data-parallel group (dp x cp), and the experts' in another, reduced over the ranks that hold the
// same experts (the expert-data-parallel group: dp/ep ranks, x cp). Each has its own flat buffers, buckets and ZeRO
// shards. The model reaches both through this one ParamAccess: units [0, D) are the blocks' layout's, units
// [D, D + X) the experts' (D = the blocks' unit count); checkpoint access goes by ParamTensor::expert.
#pragma once

#include <memory>

#include "engine/parallel/train_state.h"

namespace us {

class ExpertSplitState final : public TrainState {
public:
    ExpertSplitState(std::unique_ptr<TrainState> blocks, int block_units, std::unique_ptr<TrainState> experts);

    void acquire(int unit, Pass pass) override;
    void release(int unit, Pass pass) override;
    Tensor weights(int unit) override;
    Tensor grads(int unit) override;
    void grads_done(int unit) override;

    void initialize(const GPTConfig& cfg, uint64_t seed) override;
    void begin_step() override;
    void begin_backward(int micro_batch, bool last) override;
    void finish_gradients() override;
    void sync_tied_embedding(Communicator& group) override { m_blocks->sync_tied_embedding(group); }
    double local_grad_sumsq(bool include_embedding, bool include_tp_replicated) override;
    std::vector<Tensor> grad_pieces(const ParamTensor& t) override { return part(t).grad_pieces(t); }
    bool sharded() const override { return m_blocks->sharded(); }
    void optimizer_step(double lr, float clip_coef) override;
    int optimizer_steps_taken() const override { return m_blocks->optimizer_steps_taken(); }
    bool has_optimizer_moments() const override { return m_blocks->has_optimizer_moments(); }
    void export_tensor(const ParamTensor& t, StateSlot slot, float* out) override {
        part(t).export_tensor(t, slot, out);
    }
    void import_tensor(const ParamTensor& t, StateSlot slot, const float* in) override {
        part(t).import_tensor(t, slot, in);
    }
    void set_optimizer_steps(int steps) override;

    TrainState& blocks() { return *m_blocks; }
    TrainState& experts() { return *m_experts; }

private:
    TrainState& part(const ParamTensor& t) { return t.expert ? *m_experts : *m_blocks; }
    TrainState& of(int unit) { return unit < m_block_units ? *m_blocks : *m_experts; }
    int local(int unit) const { return unit < m_block_units ? unit : unit - m_block_units; }

    std::unique_ptr<TrainState> m_blocks;
    int m_block_units;
    std::unique_ptr<TrainState> m_experts;
};

}  // namespace us
