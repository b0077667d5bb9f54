// The mixture-of-experts pieces on the CPU backend: the router's backward (renormalised gates and the balance loss
// through the softmax), dispatch and combine, the capacity rule against a direct implementation, a whole MoE model's
// gradients (router, gates, experts, balance loss) against finite differences, the parameter count, and the
// memory of an MoE model against the prediction.
#include <algorithm>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/model/moe.h"
#include "engine/train/trainer.h"
#include "profiler/predict/predict.h"
#include "memory_prediction_check.h"
#include "test_util.h"

using namespace us;
using namespace us::test;

namespace {

CpuBackend& backend() {
    static CpuBackend be(2);
    return be;
}

std::vector<int32_t> ints(size_t n) { return std::vector<int32_t>(n, 0); }

}  // namespace

TEST_CASE("router backward matches finite differences: renormalised gates and the balance loss", "[cpu][ops][moe]") {
    const int N = 6, E = 5, K = 2, T = 3;  // two sequences of three tokens
    auto logits = random_vector(N * E, 201, 3.0f), R = random_vector(N * K, 202), A = random_vector(2 * E, 203);
    auto loss = [&] {
        std::vector<float> p = logits, g(N * K);
        std::vector<int32_t> idx = ints(N * K);
        backend().moe_route(tensor_of(p), Tensor::of(idx.data(), N * K), tensor_of(g), N, E, K);
        double s = dot(g, R);
        for (int n = 0; n < N; ++n)
            for (int e = 0; e < E; ++e) s += double(p[size_t(n) * E + e]) * A[size_t(n / T) * E + e];
        return s;
    };
    std::vector<float> p = logits, g(N * K), dl(N * E);
    std::vector<int32_t> idx = ints(N * K);
    backend().moe_route(tensor_of(p), Tensor::of(idx.data(), N * K), tensor_of(g), N, E, K);
    for (int n = 0; n < N; ++n) {  // the gates of a token sum to one, its choices are its largest probabilities
        CHECK(g[size_t(n) * K] + g[size_t(n) * K + 1] == Approx(1.0f));
        CHECK(p[size_t(n) * E + idx[size_t(n) * K]] >= p[size_t(n) * E + idx[size_t(n) * K + 1]]);
    }
    backend().moe_route_backward(tensor_of(dl), tensor_of(p), Tensor::of(idx.data(), N * K), tensor_of(g), tensor_of(R),
                                 tensor_of(A), N, E, K, T);
    check_gradient("dlogits", logits, dl, loss, {.eps = 1e-3, .atol = 1e-4, .rtol = 1e-2, .samples = 30});
}

TEST_CASE("dispatch and combine backward match finite differences", "[cpu][ops][moe]") {
    const int N = 4, K = 2, C = 5, M = 6;
    // each token's two choices go to rows of the expert-ordered buffer
    // (token n's choice k is rows[n K + k]); token 3's choices are both dropped (-1), rows 0..5 each used once
    std::vector<int32_t> rows = {0, 3, 4, 1, 2, 5, -1, -1};
    auto x = random_vector(N * C, 204), y = random_vector(M * C, 205), gates = random_vector(N * K, 206);
    auto R = random_vector(N * C, 207), Ry = random_vector(M * C, 208);
    const Tensor r = Tensor::of(rows.data(), N * K);
    auto combine_loss = [&] {
        std::vector<float> out(N * C, 0.0f);
        backend().moe_combine(tensor_of(out), tensor_of(y), r, tensor_of(gates), N, K, C);
        return dot(out, R);
    };
    std::vector<float> dy(M * C, 0.0f), dg(N * K);
    backend().moe_combine_backward(tensor_of(dy), tensor_of(dg), tensor_of(R), tensor_of(y), r, tensor_of(gates), N, K,
                                   C);
    check_gradient("dy", y, dy, combine_loss, {.samples = 30});
    check_gradient("dgates", gates, dg, combine_loss, {.samples = 8});
    auto dispatch_loss = [&] {
        std::vector<float> out(M * C, 0.0f);
        backend().moe_dispatch(tensor_of(out), tensor_of(x), r, N, K, C);
        return dot(out, Ry);
    };
    std::vector<float> dx(N * C, 0.0f);
    backend().moe_dispatch_backward(tensor_of(dx), tensor_of(Ry), r, N, K, C);
    check_gradient("dx", x, dx, dispatch_loss, {.samples = 20});
}

TEST_CASE("the capacity rule drops what a direct implementation of it drops", "[cpu][moe]") {
    const int N = 50, K = 2, E = 4;
    Rng rng(209);
    std::vector<int32_t> topk(size_t(N) * K);
    for (int n = 0; n < N; ++n) {  // a skewed routing: expert 0 popular
        topk[size_t(n) * K] = rng.next_below(3) == 0 ? int32_t(rng.next_below(E)) : 0;
        do topk[size_t(n) * K + 1] = int32_t(rng.next_below(E));
        while (topk[size_t(n) * K + 1] == topk[size_t(n) * K]);
    }
    for (double factor : {0.0, 1.0, 1.25, 2.0}) {
        const int capacity = moe_capacity(N, K, E, factor);
        const RoutingPlan plan = plan_routing(topk.data(), N, K, E, capacity);
        // the rule, directly: tokens in order, each choice kept while its expert has room
        std::vector<int> taken(E, 0);
        int64_t dropped = 0;
        for (int i = 0; i < N * K; ++i) {
            if (capacity > 0 && taken[size_t(topk[size_t(i)])] >= capacity)
                ++dropped;
            else
                ++taken[size_t(topk[size_t(i)])];
        }
        INFO("capacity factor " << factor << " (" << capacity << " rows per expert)");
        CHECK(plan.dropped == dropped);
        CHECK(plan.kept() + plan.dropped == N * K);
        if (factor == 0.0) CHECK(dropped == 0);
        // rows are a permutation of [0, kept), experts in order
        std::vector<int32_t> used;
        for (int32_t row : plan.rows)
            if (row >= 0) used.push_back(row);
        std::sort(used.begin(), used.end());
        for (size_t i = 0; i < used.size(); ++i) CHECK(used[i] == int32_t(i));
    }
    CHECK(moe_capacity(100, 2, 8, 1.25) == 32);  // ceil(100 * 2 / 8 * 1.25)
}

TEST_CASE("an MoE model's gradients match finite differences: router, experts, balance loss",
          "[cpu][model][moe][gradcheck]") {
    TrainConfig c;
    c.model.vocab = 256, c.model.hidden = 16, c.model.layers = 2, c.model.heads = 2, c.model.seq = 8;
    c.model.moe_experts = 3, c.model.moe_topk = 2, c.model.moe_every = 2;  // block 1 is an MoE block
    c.moe_aux_loss_coef = 0.5;                                             // large enough to show in the check
    c.batch = 2, c.steps = 1, c.quiet = true, c.seed = 5;
    c.data = sample_data_file("moe-grad-data.txt", 20000);
    CpuBackend be(2);
    Trainer t(c, be);
    GPT& model = t.chunk_model(0);
    TrainState& state = t.state();
    const int N = c.batch * c.model.seq;
    std::vector<int32_t> tok(static_cast<size_t>(N)), tgt(static_cast<size_t>(N));
    for (int i = 0; i < N; ++i) tok[size_t(i)] = (i * 37) % 256, tgt[size_t(i)] = (i * 11 + 5) % 256;
    // the loss the gradients follow: the mean cross-entropy plus the balance loss, mean over the sequences
    auto loss = [&] {
        model.reset_moe_stats();
        ChunkActivations acts;
        model.forward(acts, {tok.data(), tgt.data()}, Tensor{}, state);
        double aux = 0;
        for (const MoeStats& s : model.moe_stats()) aux += s.aux_loss;
        return acts.loss_sum / N + aux / c.batch;
    };
    state.begin_step();
    state.begin_backward(0, true);
    {
        ChunkActivations acts;
        model.forward(acts, {tok.data(), tgt.data()}, Tensor{}, state);
        model.backward(acts, Tensor{}, Tensor{}, 1.0f, state);
    }
    const int units = int(t.layout().units().size());
    auto check_unit = [&](const ParamLayout& layout, int base) {
        for (const ParamTensor& pt : layout.tensors()) {
            const Tensor w = state.weights(base + pt.unit), g = state.grads(base + pt.unit);
            const int64_t at = pt.offset - layout.units()[size_t(pt.unit)].offset;
            std::vector<float> x(w.f32() + at, w.f32() + at + pt.numel), dx(g.f32() + at, g.f32() + at + pt.numel);
            auto loss_at = [&] {
                std::copy(x.begin(), x.end(), w.f32() + at);
                return loss();
            };
            check_gradient(pt.name.c_str(), x, dx, loss_at, {.eps = 1e-3, .atol = 2e-4, .rtol = 2e-2, .samples = 5});
            std::copy(x.begin(), x.end(), w.f32() + at);
        }
    };
    check_unit(t.layout(), 0);
    check_unit(t.expert_layout(), units);
}

TEST_CASE("MoE parameter counts follow the formula, and tokens use K of the E experts", "[cpu][model][moe]") {
    GPTConfig c;
    c.vocab = 256, c.hidden = 32, c.layers = 4, c.heads = 4, c.moe_experts = 8, c.moe_topk = 2;
    const int64_t h = 32, v = 256, L = 4, E = 8;
    // every block MoE: N = h v + L (4h^2 + 8h + h E + E (8h^2 + 5h)) + 2h
    CHECK(c.num_params() == h * v + L * (4 * h * h + 8 * h + h * E + E * (8 * h * h + 5 * h)) + 2 * h);
    CHECK(c.active_params() == h * v + L * (4 * h * h + 8 * h + h * E + 2 * (8 * h * h + 5 * h)) + 2 * h);
    CHECK(ParamLayout::whole_model(c).total() + ParamLayout::whole_experts(c).total() == c.num_params());
    c.moe_every = 2;  // blocks 1 and 3 MoE, 0 and 2 dense
    CHECK(c.num_params() ==
          h * v + 2 * (12 * h * h + 13 * h) + 2 * (4 * h * h + 8 * h + h * E + E * (8 * h * h + 5 * h)) + 2 * h);
    CHECK(ParamLayout::whole_model(c).total() + ParamLayout::whole_experts(c).total() == c.num_params());
    // expert parallelism: a rank holds E/ep experts of every MoE block
    const ParamLayout mine = ParamLayout::build_experts(c, {{0, 4}}, {}, EpPlacement{4, 1});
    CHECK(mine.total() == 2 * (E / 4) * (8 * h * h + 5 * h));
    CHECK(mine.first_expert() == 2);
    CHECK(mine.find("transformer.h.1.mlp.experts.2.c_fc.weight") != nullptr);
    CHECK(mine.find("transformer.h.1.mlp.experts.4.c_fc.weight") == nullptr);
}

TEST_CASE("an MoE model's memory on one rank equals the prediction, category by category", "[cpu][memory][moe]") {
    // One rank and no capacity: every choice stays on the rank, so the expert rows are exactly N K.
    for (Precision precision : {Precision::fp32, Precision::bf16})
        for (Recompute recompute : {Recompute::none, Recompute::selective, Recompute::full}) {
            TrainConfig c;
            c.model.vocab = 256, c.model.hidden = 32, c.model.layers = 4, c.model.heads = 4, c.model.seq = 16;
            c.model.moe_experts = 4, c.model.moe_topk = 2, c.model.moe_every = 2;
            c.precision = precision, c.recompute = recompute;
            c.batch = 2, c.steps = 2, c.quiet = true, c.seed = 3;
            c.data = sample_data_file("moe-memory-data.txt", 20000);
            INFO(precision_name(precision) << ", recompute " << recompute_name(recompute));
            const predict::Prediction p = check_memory_as_predicted(c);
            CHECK(p.params == c.model.num_params());
            CHECK(p.active_params == c.model.active_params());
            CHECK(p.moe_rows_per_layer == int64_t(c.batch) * c.model.seq * c.model.moe_topk);
        }
}

TEST_CASE("the MoE layer's output is the gated mixture of its experts, its balance loss E sum f P per sequence",
          "[cpu][moe]") {
    const int B = 2, T = 5, N = B * T, C = 8, F = 4 * C, E = 3, K = 2;
    const double coef = 0.3;
    CpuBackend& be = backend();
    auto x = random_vector(N * C, 210), router = random_vector(E * C, 211, 2.0f);
    auto experts = random_vector(E * (F * C + F + C * F + C), 212, 0.3f);
    std::vector<float> probs(N * E), gates(N * K), out(N * C, 0.0f);
    std::vector<int32_t> topk(N * K), rows(N * K);
    BlockParams p;
    p.router_w = tensor_of(router);
    LocalExperts exchange(E);
    MoeLayer layer(MoeConfig{E, K, 0.0, coef}, be, exchange, nullptr);
    MoeActs acts;
    MoeStats stats;
    stats.routed.assign(E, 0);
    layer.forward(acts, tensor_of(x), p, tensor_of(experts), tensor_of(probs), Tensor::of(topk.data(), N * K),
                  tensor_of(gates), Tensor::of(rows.data(), N * K), tensor_of(out), B, T, T, stats);
    // directly: softmax of x Wr^T, the top-2, gates renormalised, each chosen expert's GeLU MLP
    auto gelu = [](double v) { return 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); };
    double balance = 0;
    for (int s = 0; s < B; ++s) {
        std::vector<double> f(E, 0.0), P(E, 0.0);
        for (int n = s * T; n < (s + 1) * T; ++n) {
            std::vector<double> logit(E);
            double most = -1e30, sum = 0;
            for (int e = 0; e < E; ++e) {
                logit[e] = 0;
                for (int c = 0; c < C; ++c) logit[e] += double(x[n * C + c]) * router[e * C + c];
                most = std::max(most, logit[e]);
            }
            for (int e = 0; e < E; ++e) sum += std::exp(logit[e] - most);
            std::vector<int> order = {0, 1, 2};
            std::sort(order.begin(), order.end(), [&](int a, int b) { return logit[a] > logit[b]; });
            const double p0 = std::exp(logit[order[0]] - most) / sum, p1 = std::exp(logit[order[1]] - most) / sum;
            for (int e = 0; e < E; ++e) P[e] += std::exp(logit[e] - most) / sum / T;
            CHECK(topk[n * K] == order[0]);
            CHECK(topk[n * K + 1] == order[1]);
            for (int k = 0; k < K; ++k) {
                const int e = order[k];
                f[e] += 1.0 / (T * K);
                const double gate = (k == 0 ? p0 : p1) / (p0 + p1);
                const float* w = experts.data() + size_t(e) * (F * C + F + C * F + C);
                const float *fc_w = w, *fc_b = w + F * C, *proj_w = w + F * C + F, *proj_b = w + F * C + F + C * F;
                std::vector<double> hid(F);
                for (int j = 0; j < F; ++j) {
                    double v = fc_b[j];
                    for (int c = 0; c < C; ++c) v += double(x[n * C + c]) * fc_w[j * C + c];
                    hid[j] = gelu(v);
                }
                for (int c = 0; c < C; ++c) {
                    double y = proj_b[c];
                    for (int j = 0; j < F; ++j) y += hid[j] * proj_w[c * F + j];
                    if (k == 0)
                        out[n * C + c] -= float(gate * y);  // what is left must be the other expert's
                    else
                        CHECK(out[n * C + c] == Approx(gate * y).margin(1e-5));
                }
            }
        }
        double fp = 0;
        for (int e = 0; e < E; ++e) fp += f[e] * P[e];
        balance += E * fp;
    }
    CHECK(stats.balance == Approx(balance).epsilon(1e-6));
    CHECK(stats.aux_loss == Approx(coef * balance).epsilon(1e-6));
    CHECK(stats.dropped == 0);
    CHECK(stats.routed[0] + stats.routed[1] + stats.routed[2] == N * K);
}
