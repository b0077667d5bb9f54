// Expert parallelism (GShard, Lepikhin et al. 2020; Switch Transformer, Fedus et al. 2021; as Megatron-LM and
// torchtitan carve it out of data parallelism): the E experts of each MoE block are spread over the ep ranks of an
// expert group (E/ep whole experts each), and a token's rows travel to the ranks that hold its experts and back.
// One exchange per micro-batch and MoE block: an all-to-all of the row counts (each rank learns how many rows it
// receives for each of its experts), then an all-to-all of the rows themselves, reordered so that each local
// expert's rows are contiguous; the results come back the same way reversed, and backward repeats both for the
// gradients. The expert group is a set of dp ranks: each of them reads its own data, and the experts' gradients
// are reduced over the ranks that hold the same experts (the expert-data-parallel group, dp/ep ranks).
#pragma once

#include "engine/comm/communicator.h"
#include "engine/model/moe.h"

namespace us {

class ExpertParallel final : public ExpertExchange {
public:
    ExpertParallel(Communicator& ep_group, int experts);
    int first_expert() const override { return m_group.rank() * local_experts(); }
    int local_experts() const override { return m_experts / m_group.size(); }
    Route route(const RoutingPlan& plan, Backend& backend) override;
    bool in_place() const override { return false; }
    void to_experts(const Route& route, Tensor token_rows, Tensor expert_rows, Backend& backend, int C) override;
    void to_tokens(const Route& route, Tensor expert_rows, Tensor token_rows, Backend& backend, int C) override;

private:
    Communicator& m_group;
    int m_experts;
};

}  // namespace us
