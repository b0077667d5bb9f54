// The mixture-of-experts layer that replaces the MLP of an MoE block (Shazeer et al. 2017, "Outrageously Large
// Neural Networks"; Switch Transformer, Fedus et al. 2021; top-K routing with renormalised gates as in Mixtral):
// a bias-free router h -> E, its softmax, each token's K most probable experts with their probabilities
// renormalised over the K as gates; each expert the block's 4h GeLU MLP with biases; the output the gate-weighted
// sum of the token's experts.
//
// One micro-batch on a rank: route (on the device), plan (on the host: which row of the expert-ordered buffer each
// of a token's choices takes, which choices an expert past its capacity drops), dispatch the token rows into that
// buffer, hand it to the experts through an ExpertExchange (the rank's own, or expert parallelism's all-to-all),
// run each expert on its rows, bring the results back and combine them. Backward walks the same way back.
//
// The load-balancing loss is Switch's, E * sum_i f_i P_i (f_i: the share of the choices that go to expert i, P_i:
// its mean router probability), computed per sequence (as DeepSeek's sequence-wise balance loss) so that it does
// not depend on how sequences are grouped into micro-batches and ranks: data and expert parallelism reproduce one
// rank exactly with it on. Its gradient reaches the router through P.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/comm/communicator.h"
#include "engine/model/param_layout.h"

namespace us {

// The rows per expert a capacity factor allows: ceil(tokens * K / E * factor); 0 (no limit) when factor is 0.
int moe_capacity(int64_t tokens, int K, int E, double factor);

// Which row of the expert-ordered buffer each (token, choice) takes. Experts take their choices in token order (then
// choice order), so the plan is the same on every layout; beyond its capacity an expert drops the rest.
struct RoutingPlan {
    int N = 0, K = 0, E = 0;
    int capacity = 0;             // rows per expert; 0: dropless
    std::vector<int32_t> rows;    // (N,K): the choice's row, or -1 when dropped
    std::vector<int32_t> counts;  // (E): rows each expert takes; expert e's rows follow those of experts < e
    std::vector<int32_t> routed;  // (E): choices each expert received, kept or not
    int64_t dropped = 0;
    int64_t kept() const;
};
RoutingPlan plan_routing(const int32_t* topk, int N, int K, int E, int capacity);

// How the expert-ordered rows reach the experts that compute them and come back.
class ExpertExchange {
public:
    virtual ~ExpertExchange() = default;
    virtual int first_expert() const = 0;  // the experts this rank computes: [first, first + local)
    virtual int local_experts() const = 0;
    // One micro-batch's exchange, set up from its plan (collective under expert parallelism: the row counts).
    struct Route {
        std::vector<int32_t> local_counts;          // rows of each local expert this rank computes
        int64_t expert_rows = 0;                    // their sum
        std::vector<int> send_counts, recv_counts;  // rows to / from each rank of the ep group
        Allocation index;                           // reordering: expert order of received rows, and back
        Tensor to_expert_order, to_source_order;
    };
    virtual Route route(const RoutingPlan& plan, Backend& backend) = 0;
    // Whether the expert-side rows are the token-side rows themselves (no exchange: one rank holds every expert).
    virtual bool in_place() const = 0;
    // token rows (plan.kept(), C) in expert order -> this rank's experts' rows (route.expert_rows, C), and back.
    virtual void to_experts(const Route& route, Tensor token_rows, Tensor expert_rows, Backend& backend, int C) = 0;
    virtual void to_tokens(const Route& route, Tensor expert_rows, Tensor token_rows, Backend& backend, int C) = 0;
};

// Every expert on this rank: the rows stay where they are.
class LocalExperts final : public ExpertExchange {
public:
    explicit LocalExperts(int experts) : m_experts(experts) {}
    int first_expert() const override { return 0; }
    int local_experts() const override { return m_experts; }
    Route route(const RoutingPlan& plan, Backend& backend) override;
    bool in_place() const override { return true; }
    void to_experts(const Route&, Tensor, Tensor, Backend&, int) override {}
    void to_tokens(const Route&, Tensor, Tensor, Backend&, int) override {}

private:
    int m_experts;
};

// What one MoE block keeps from its forward for its backward (besides the block's table entries: the router's
// probabilities, the choices, gates and rows, which have fixed sizes).
struct MoeActs {
    RoutingPlan plan;
    ExpertExchange::Route route;
    Allocation token_side;          // (kept, C): the experts' outputs back in expert order (for the gates' gradient)
    Allocation expert_side;         // (expert_rows, C) inputs, then (expert_rows, F) twice: before and after GeLU
    std::vector<double> aux_share;  // (sequences, E): f_i of each sequence, the balance loss's gradient factor
};

// Statistics of one MoE block over a step, for the routing counters and the report.
struct MoeStats {
    std::vector<int64_t> routed;  // (E): choices per expert
    int64_t dropped = 0;
    double aux_loss = 0;  // the balance loss summed over this rank's sequences (counted once over the cp group)
    double balance = 0;   // E sum_i f_i P_i summed likewise, without the loss's weight (1 per sequence: balanced)
};

struct MoeConfig {
    int E = 0, K = 0;
    double capacity_factor = 0, aux_coef = 0;
    int tp = 1, tp_rank = 0;           // experts' matrices split over tp like the MLP's; bias added on tp rank 0 only
    Communicator* tp_group = nullptr;  // under tp each rank's expert outputs are partial: so are the gates' gradients
};

class MoeLayer {
public:
    MoeLayer(const MoeConfig& cfg, Backend& backend, ExpertExchange& exchange, Communicator* cp_group);

    // x (N,C): the rows of B sequences of T tokens each (T = the sequence's rows on this rank); probs (N,E) fp32,
    // topk, rows (N,K) i32, gates (N,K) fp32: the block's saved views. out (N,C) += the layer's output (under tp a
    // partial sum: the caller reduces it). seq_len: the whole sequence's tokens (across cp) for the balance loss.
    void forward(MoeActs& acts, Tensor x, const BlockParams& p, Tensor experts, Tensor probs, Tensor topk, Tensor gates,
                 Tensor rows, Tensor out, int B, int T, int seq_len, MoeStats& stats);
    // dout (N,C): the output's gradient (all rows). dx (N,C) += the experts' share of x's gradient (partial under
    // tp); router_dx (N,C) = the router's share (whole on every tp rank). dp: the block's gradients (the router's),
    // dexperts: the experts unit's. grad_scale: d(total loss)/d(mean loss over the micro-batch), as the head gets.
    // x (N,C) is needed only at the end, for the router's weight gradient: `input` returns it then (the caller may
    // re-gather it into dout's buffer, done with by that time).
    void backward(MoeActs& acts, Tensor dout, const std::function<Tensor()>& input, const BlockParams& p,
                  const BlockParams& dp, Tensor experts, Tensor dexperts, Tensor probs, Tensor topk, Tensor gates,
                  Tensor rows, Tensor dx, Tensor router_dx, int B, int T, int seq_len, float grad_scale);

private:
    // The experts' products, in the profiler's names ("expert 3 c_fc dW"): interned once per expert and product, as
    // the dense layers' names are (an expert GEMM is every expert's, every pass: no string made per op).
    enum ExpertGemm { fc, proj, fc_dx, proj_dx, fc_dw, proj_dw, kExpertGemms };
    uint32_t expert_name(int expert, ExpertGemm which);
    void expert_forward(const MoeActs& acts, Tensor experts, Tensor y);
    MoeConfig m_cfg;
    Backend& m_be;
    ExpertExchange& m_exchange;
    Communicator* m_cp;
    int m_C = 0;
    std::vector<std::array<uint32_t, kExpertGemms>> m_expert_names;  // by expert; 0: not interned yet (id + 1)
    // Host scratch of the routing and the balance loss, kept across micro-batches (sized at the first).
    std::vector<int32_t> m_choice;
    std::vector<float> m_prob, m_aux_host;
    std::vector<double> m_local, m_total, m_all;
};

}  // namespace us
