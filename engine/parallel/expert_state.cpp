#include "engine/parallel/expert_state.h"

namespace us {

ExpertSplitState::ExpertSplitState(std::unique_ptr<TrainState> blocks, int block_units,
                                   std::unique_ptr<TrainState> experts)
    : m_blocks(std::move(blocks)), m_block_units(block_units), m_experts(std::move(experts)) {}

void ExpertSplitState::acquire(int unit, Pass pass) { of(unit).acquire(local(unit), pass); }
void ExpertSplitState::release(int unit, Pass pass) { of(unit).release(local(unit), pass); }
Tensor ExpertSplitState::weights(int unit) { return of(unit).weights(local(unit)); }
Tensor ExpertSplitState::grads(int unit) { return of(unit).grads(local(unit)); }
void ExpertSplitState::grads_done(int unit) { of(unit).grads_done(local(unit)); }

void ExpertSplitState::initialize(const GPTConfig& cfg, uint64_t seed) {
    m_blocks->initialize(cfg, seed);
    m_experts->initialize(cfg, seed);
}

void ExpertSplitState::begin_step() {
    m_blocks->begin_step();
    m_experts->begin_step();
}

void ExpertSplitState::begin_backward(int micro_batch, bool last) {
    m_blocks->begin_backward(micro_batch, last);
    m_experts->begin_backward(micro_batch, last);
}

void ExpertSplitState::finish_gradients() {
    m_blocks->finish_gradients();
    m_experts->finish_gradients();
}

double ExpertSplitState::local_grad_sumsq(bool include_embedding, bool include_tp_replicated) {
    return m_blocks->local_grad_sumsq(include_embedding, include_tp_replicated) +
           m_experts->local_grad_sumsq(true, include_tp_replicated);
}

void ExpertSplitState::optimizer_step(double lr, float clip_coef) {
    m_blocks->optimizer_step(lr, clip_coef);
    m_experts->optimizer_step(lr, clip_coef);
}

void ExpertSplitState::set_optimizer_steps(int steps) {
    m_blocks->set_optimizer_steps(steps);
    m_experts->set_optimizer_steps(steps);
}

}  // namespace us
