#include "engine/model/moe.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "profiler/record/zones.h"

namespace us {

int moe_capacity(int64_t tokens, int K, int E, double factor) {
    if (factor <= 0) return 0;
    return int(std::ceil(double(tokens) * K / E * factor));
}

int64_t RoutingPlan::kept() const {
    int64_t n = 0;
    for (int32_t c : counts) n += c;
    return n;
}

RoutingPlan plan_routing(const int32_t* topk, int N, int K, int E, int capacity) {
    RoutingPlan p;
    p.N = N, p.K = K, p.E = E, p.capacity = capacity;
    p.counts.assign(size_t(E), 0);
    p.routed.assign(size_t(E), 0);
    p.rows.assign(size_t(N) * K, -1);
    // First pass: which choices each expert keeps (in token order, then choice order) and how many.
    for (int n = 0; n < N; ++n)
        for (int k = 0; k < K; ++k) {
            const int e = topk[size_t(n) * K + k];
            ++p.routed[size_t(e)];
            if (capacity > 0 && p.counts[size_t(e)] >= capacity) {
                ++p.dropped;
                continue;
            }
            p.rows[size_t(n) * K + k] = p.counts[size_t(e)]++;  // the row within the expert, for now
        }
    // Second pass: rows within an expert become rows of the buffer (experts in order).
    std::vector<int32_t> start(size_t(E), 0);
    for (int e = 1; e < E; ++e) start[size_t(e)] = start[size_t(e - 1)] + p.counts[size_t(e - 1)];
    for (int n = 0; n < N; ++n)
        for (int k = 0; k < K; ++k) {
            int32_t& r = p.rows[size_t(n) * K + k];
            if (r >= 0) r += start[size_t(topk[size_t(n) * K + k])];
        }
    return p;
}

ExpertExchange::Route LocalExperts::route(const RoutingPlan& plan, Backend&) {
    Route r;
    r.local_counts = plan.counts;
    r.expert_rows = plan.kept();
    return r;
}

MoeLayer::MoeLayer(const MoeConfig& cfg, Backend& backend, ExpertExchange& exchange, Communicator* cp_group)
    : m_cfg(cfg), m_be(backend), m_exchange(exchange), m_cp(cp_group) {}

namespace {

// C (m, n) (+)= A (m, k) op B, row-major, for the experts' products on row ranges.
void gemm(Backend& be, Tensor c, Tensor a, Tensor b, int m, int n, int k, bool trans_a, bool trans_b, float beta) {
    if (m == 0 || n == 0) return;
    GemmArgs g;
    g.trans_a = trans_a, g.trans_b = trans_b;
    g.m = m, g.n = n, g.k = k;
    g.beta = beta;
    g.a = a, g.lda = trans_a ? m : k;
    g.b = b, g.ldb = trans_b ? k : n;
    g.c = c, g.ldc = n;
    be.gemm(g);
}

}  // namespace

uint32_t MoeLayer::expert_name(int expert, ExpertGemm which) {
    static constexpr const char* what[kExpertGemms] = {"c_fc",      "c_proj",  "c_fc dX",
                                                       "c_proj dX", "c_fc dW", "c_proj dW"};
    if (m_expert_names.size() <= size_t(expert)) m_expert_names.resize(size_t(expert) + 1);
    uint32_t& id = m_expert_names[size_t(expert)][size_t(which)];
    if (id == 0) id = prof::string_id(fmt::format("expert {} {}", expert, what[which])) + 1;
    return id - 1;
}

// Each local expert's MLP on its rows: h = x W1^T + b1, g = GeLU(h), y = g W2^T (+ b2 on tp rank 0: under tp the
// ranks' y are partial sums reduced after the combine, and the bias must count once).
void MoeLayer::expert_forward(const MoeActs& acts, Tensor experts, Tensor y) {
    const int C = m_C, F = 4 * C / m_cfg.tp;
    const int64_t R = acts.route.expert_rows;
    const DType e = y.dtype;
    const Tensor x = acts.expert_side.view(e, 0, R * C), h = acts.expert_side.view(e, R * C, R * F),
                 g = acts.expert_side.view(e, R * C + R * F, R * F);
    int64_t row = 0;
    for (int j = 0; j < m_exchange.local_experts(); ++j) {
        const int m = acts.route.local_counts[size_t(j)];
        if (m == 0) continue;
        const ExpertParams w = expert_params(experts, C, m_cfg.tp, j);
        const int expert = m_exchange.first_expert() + j;
        {
            US_PROF_OP_NAME(expert_name(expert, fc));
            gemm(m_be, h.slice(row * F, int64_t(m) * F), x.slice(row * C, int64_t(m) * C), w.fc_w, m, F, C, false, true,
                 0.0f);
            m_be.add_bias(h.slice(row * F, int64_t(m) * F), w.fc_b, m, F);
        }
        m_be.gelu_forward(g.slice(row * F, int64_t(m) * F), h.slice(row * F, int64_t(m) * F));
        {
            US_PROF_OP_NAME(expert_name(expert, proj));
            const Tensor out = y.slice(row * C, int64_t(m) * C);
            gemm(m_be, out, g.slice(row * F, int64_t(m) * F), w.fcproj_w, m, C, F, false, true, 0.0f);
            if (m_cfg.tp_rank == 0) m_be.add_bias(out, w.fcproj_b, m, C);
        }
        row += m;
    }
}

void MoeLayer::forward(MoeActs& acts, Tensor x, const BlockParams& p, Tensor experts, Tensor probs, Tensor topk,
                       Tensor gates, Tensor rows, Tensor out, int B, int T, int seq_len, MoeStats& stats) {
    const int E = m_cfg.E, K = m_cfg.K, N = B * T, C = int(x.numel / N);
    m_C = C;
    const DType e = x.dtype;
    TrackedAllocator& alloc = m_be.allocator();
    // Route: logits (N,E) fp32 = x Wr^T, then softmax, top-K, gates.
    {
        US_PROF_OP_NAME(US_PROF_NAME("router"));
        gemm(m_be, probs, x, p.router_w, N, E, C, false, true, 0.0f);
    }
    m_be.moe_route(probs, topk, gates, N, E, K);
    // Plan on the host: the choices, the capacity, the rows.
    std::vector<int32_t>& choice = m_choice;
    choice.resize(size_t(N) * K);
    m_be.download(choice.data(), topk);
    acts.plan = plan_routing(choice.data(), N, K, E, moe_capacity(N, K, E, m_cfg.capacity_factor));
    m_be.upload(rows, acts.plan.rows.data());
    for (int i = 0; i < E; ++i) stats.routed[size_t(i)] += acts.plan.routed[size_t(i)];
    stats.dropped += acts.plan.dropped;
    // The balance loss per sequence: f_i (the sequence's choices of expert i over its T K) and P_i (its mean
    // probability of expert i), summed over the cp ranks that hold the sequence's other positions.
    {
        std::vector<float>& prob = m_prob;
        prob.resize(size_t(N) * E);
        m_be.download(prob.data(), probs);
        std::vector<double>& local = m_local;  // per sequence: counts, then probability sums
        local.assign(size_t(2) * B * E, 0.0);
        for (int n = 0; n < N; ++n) {
            const size_t s = size_t(n / T);
            for (int k = 0; k < K; ++k) local[s * 2 * E + size_t(choice[size_t(n) * K + k])] += 1.0;
            for (int i = 0; i < E; ++i) local[s * 2 * E + E + size_t(i)] += prob[size_t(n) * E + i];
        }
        std::vector<double>& total = m_total;
        total = local;
        if (m_cp && m_cp->size() > 1) {  // summed in rank order: the same bits on every rank
            std::vector<double>& all = m_all;
            all.resize(local.size() * size_t(m_cp->size()));
            m_cp->all_gather_bytes(local.data(), local.size() * sizeof(double), all.data());
            std::fill(total.begin(), total.end(), 0.0);
            for (int r = 0; r < m_cp->size(); ++r)
                for (size_t i = 0; i < total.size(); ++i) total[i] += all[size_t(r) * local.size() + i];
        }
        acts.aux_share.assign(size_t(B) * E, 0.0);
        for (int s = 0; s < B; ++s) {
            double aux = 0;
            for (int i = 0; i < E; ++i) {
                const double f = total[size_t(s) * 2 * E + i] / (double(seq_len) * K);
                const double P = total[size_t(s) * 2 * E + E + i] / double(seq_len);
                acts.aux_share[size_t(s) * E + i] = f;
                aux += f * P;
            }
            if (!m_cp || m_cp->rank() == 0) {  // once per sequence
                stats.balance += E * aux;
                stats.aux_loss += m_cfg.aux_coef * E * aux;
            }
        }
    }
    // Dispatch to the experts and run them.
    acts.route = m_exchange.route(acts.plan, m_be);
    const int64_t M = acts.plan.kept(), R = acts.route.expert_rows, F = 4 * C / m_cfg.tp;
    acts.expert_side = alloc.allocate(size_t(R * C + 2 * R * F) * dtype_size(e), MemCategory::activations,
                                      "moe expert rows (inputs, hidden, GeLU)");
    acts.token_side = alloc.allocate(size_t(std::max<int64_t>(M, 1) * C) * dtype_size(e), MemCategory::activations,
                                     "moe expert outputs (token side)");
    const Tensor y_tokens = acts.token_side.view(e, 0, M * C);
    if (m_exchange.in_place()) {
        m_be.moe_dispatch(acts.expert_side.view(e, 0, M * C), x, rows, N, K, C);
        expert_forward(acts, experts, y_tokens);
    } else {
        Allocation sent = alloc.allocate(size_t(std::max<int64_t>(std::max(M, R), 1) * C) * dtype_size(e),
                                         MemCategory::comm_buffers, "moe dispatch / combine rows");
        m_be.moe_dispatch(sent.view(e, 0, M * C), x, rows, N, K, C);
        m_exchange.to_experts(acts.route, sent.view(e, 0, M * C), acts.expert_side.view(e, 0, R * C), m_be, C);
        const Tensor y_experts = sent.view(e, 0, R * C);  // the dispatched rows are no longer needed
        expert_forward(acts, experts, y_experts);
        m_exchange.to_tokens(acts.route, y_experts, y_tokens, m_be, C);
    }
    m_be.moe_combine(out, y_tokens, rows, gates, N, K, C);
}

void MoeLayer::backward(MoeActs& acts, Tensor dout, const std::function<Tensor()>& input, const BlockParams& p,
                        const BlockParams& dp, Tensor experts, Tensor dexperts, Tensor probs, Tensor topk, Tensor gates,
                        Tensor rows, Tensor dx, Tensor router_dx, int B, int T, int seq_len, float grad_scale) {
    const int E = m_cfg.E, K = m_cfg.K, N = B * T, C = int(dout.numel / N), F = 4 * C / m_cfg.tp;
    m_C = C;
    const DType e = dout.dtype;
    const int64_t M = acts.plan.kept(), R = acts.route.expert_rows;
    const bool in_place = m_exchange.in_place();
    // Temporaries: the token-side gradient rows, the expert side's (its inputs' gradient reusing them when the
    // exchange is in place), the hidden gradient, and the router's fp32 pieces.
    const int64_t token_rows = M * C, expert_in = in_place ? 0 : R * C, hidden = R * F;
    const int64_t floats = int64_t(N) * K + int64_t(N) * E + int64_t(B) * E;
    Allocation tmp = m_be.allocator().allocate(
        size_t(token_rows + 2 * expert_in + hidden + (e == DType::bf16 ? int64_t(N) * E : 0)) * dtype_size(e) +
            size_t(floats) * 4,
        MemCategory::temporaries, "moe backward");
    int64_t at = 0;
    auto take = [&](DType t, int64_t n) {
        const Tensor v = Tensor::of(static_cast<char*>(tmp.data()) + at, t, n);
        at += n * int64_t(dtype_size(t));
        return v;
    };
    const Tensor dy_tokens = take(e, token_rows), dgates = take(DType::f32, int64_t(N) * K);
    const Tensor dy_experts = in_place ? dy_tokens : take(e, expert_in);
    const Tensor dx_experts = in_place ? dy_tokens : take(e, expert_in);  // in place: dy is done with by then
    const Tensor dhidden = take(e, hidden);
    const Tensor dlogits = take(DType::f32, int64_t(N) * E), aux = take(DType::f32, int64_t(B) * E);
    const Tensor dlogits_e = e == DType::bf16 ? take(e, int64_t(N) * E) : dlogits;

    // Combine backward, and the gradient rows to the experts. Under tp the experts' outputs are the ranks' partial
    // sums, and so are the dot products that make the gates' gradient: summed over the group.
    m_be.moe_combine_backward(dy_tokens, dgates, dout, acts.token_side.view(e, 0, M * C), rows, gates, N, K, C);
    if (m_cfg.tp_group && m_cfg.tp > 1) {
        US_PROF_OP_NAME(US_PROF_NAME("moe gates' gradient (all-reduce over tp)"));
        m_cfg.tp_group->all_reduce(dgates);
    }
    m_exchange.to_experts(acts.route, dy_tokens, dy_experts, m_be, C);
    // Each expert's backward on its rows.
    const Tensor xs = acts.expert_side.view(e, 0, R * C), hs = acts.expert_side.view(e, R * C, R * F),
                 gs = acts.expert_side.view(e, R * C + R * F, R * F);
    int64_t row = 0;
    for (int j = 0; j < m_exchange.local_experts(); ++j) {
        const int m = acts.route.local_counts[size_t(j)];
        if (m == 0) continue;
        const ExpertParams w = expert_params(experts, C, m_cfg.tp, j), dw = expert_params(dexperts, C, m_cfg.tp, j);
        const int expert = m_exchange.first_expert() + j;
        const Tensor dy = dy_experts.slice(row * C, int64_t(m) * C), dh = dhidden.slice(row * F, int64_t(m) * F);
        {
            US_PROF_OP_NAME(expert_name(expert, proj_dx));
            gemm(m_be, dh, dy, w.fcproj_w, m, F, C, false, false, 0.0f);  // d(GeLU out) = dy W2
        }
        m_be.bias_backward(dw.fcproj_b, dy, m, C);
        {
            US_PROF_OP_NAME(expert_name(expert, proj_dw));
            gemm(m_be, dw.fcproj_w, dy, gs.slice(row * F, int64_t(m) * F), C, F, m, true, false, 1.0f);
        }
        m_be.gelu_backward(dh, hs.slice(row * F, int64_t(m) * F), dh);
        m_be.bias_backward(dw.fc_b, dh, m, F);
        {
            US_PROF_OP_NAME(expert_name(expert, fc_dw));
            gemm(m_be, dw.fc_w, dh, xs.slice(row * C, int64_t(m) * C), F, C, m, true, false, 1.0f);
        }
        {
            US_PROF_OP_NAME(expert_name(expert, fc_dx));
            gemm(m_be, dx_experts.slice(row * C, int64_t(m) * C), dh, w.fc_w, m, C, F, false, false, 0.0f);
        }
        row += m;
    }
    // The inputs' gradient rows back to the tokens, summed over each token's choices.
    if (in_place) {
        m_be.moe_dispatch_backward(dx, dx_experts, rows, N, K, C);
    } else {
        m_exchange.to_tokens(acts.route, dx_experts, dy_tokens, m_be, C);  // dy_tokens is free again
        m_be.moe_dispatch_backward(dx, dy_tokens, rows, N, K, C);
    }
    // The router: the gates' gradient through the renormalisation, the balance loss's on the probabilities
    // (d/dP_i(s) of coef E sum f P, P the mean over the sequence's seq_len tokens, each sequence weighing
    // grad_scale / B in the loss as the head's tokens weigh grad_scale / (B T)), then the softmax.
    std::vector<float>& aux_host = m_aux_host;
    aux_host.resize(size_t(B) * E);
    for (size_t i = 0; i < aux_host.size(); ++i)
        aux_host[i] = float(m_cfg.aux_coef * E * acts.aux_share[i] / double(seq_len) * double(grad_scale) / double(B));
    m_be.upload(aux, aux_host.data());
    m_be.moe_route_backward(dlogits, probs, topk, gates, dgates, aux, N, E, K, T);
    if (e == DType::bf16) m_be.copy(dlogits_e, dlogits);  // the router's GEMMs in the compute dtype
    {
        US_PROF_OP_NAME(US_PROF_NAME("router dW"));
        gemm(m_be, dp.router_w, dlogits_e, input(), E, C, N, true, false, 1.0f);
    }
    {
        US_PROF_OP_NAME(US_PROF_NAME("router dX"));
        gemm(m_be, router_dx, dlogits_e, p.router_w, N, C, E, false, false, 0.0f);
    }
}

}  // namespace us
