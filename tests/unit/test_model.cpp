// The model as a whole: parameter count against the Playbook's formula, finite-difference gradients of the full
// network, and recomputation modes that change memory but not the numbers.
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/model/gpt.h"
#include "engine/parallel/replicated_state.h"
#include "test_util.h"

using namespace us;
using namespace us::test;

namespace {

struct Replica {
    CpuBackend be{2};
    GPTConfig cfg;
    ModelOptions mo;
    ParamLayout layout;
    ReplicatedState state;
    GPT model;
    Replica(const GPTConfig& c, const ModelOptions& o, uint64_t seed = 5)
        : cfg(c),
          mo(o),
          layout(ParamLayout::whole_model(c)),
          state(be, layout, o.precision, false, AdamWConfig{}, nullptr),
          model(c, o, be, layout) {
        state.initialize(cfg, seed);
    }
};

GPTConfig tiny_config() {
    GPTConfig c;
    c.vocab = 32, c.hidden = 16, c.layers = 2, c.heads = 2, c.seq = 8;
    return c;
}

std::vector<int32_t> tokens_for(int n, int vocab, uint64_t seed) {
    Rng rng(seed);
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = int32_t(rng.next_below(uint64_t(vocab)));
    return t;
}

}  // namespace

TEST_CASE("parameter count equals N = h*v + L*(12h^2 + 13h) + 2h", "[cpu][model]") {
    for (auto [v, h, L, a] : std::vector<std::tuple<int, int, int, int>>{
             {256, 64, 2, 4}, {256, 256, 4, 4}, {50304, 768, 12, 12}, {1000, 96, 7, 3}, {256, 8, 1, 1}}) {
        GPTConfig c;
        c.vocab = v, c.hidden = h, c.layers = L, c.heads = a;
        const int64_t formula = int64_t(h) * v + int64_t(L) * (12LL * h * h + 13LL * h) + 2LL * h;
        CHECK(c.num_params() == formula);
        // the layout has exactly that many elements, in nanoGPT's names, every tensor counted once
        const ParamLayout layout = ParamLayout::whole_model(c);
        CHECK(layout.total() == formula);
        int64_t sum = 0;
        for (const auto& t : layout.tensors()) sum += t.numel;
        CHECK(sum == formula);
        CHECK(layout.find("transformer.h.0.attn.c_attn.weight")->rows == 3 * h);
        CHECK(layout.find("transformer.h.0.mlp.c_proj.weight")->cols == 4 * h);
    }
}

TEST_CASE("pipeline chunk layouts partition the blocks, first and last chunks hold the embedding", "[cpu][model]") {
    GPTConfig c = tiny_config();
    c.layers = 4;
    const ParamLayout first = ParamLayout::build(c, 0, 2), last = ParamLayout::build(c, 2, 4);
    CHECK(first.is_first_chunk());
    CHECK_FALSE(first.is_last_chunk());
    CHECK(last.is_last_chunk());
    CHECK(last.embedding_unit() >= 0);  // the tied head's copy of wte
    CHECK(first.total() + last.total() == c.num_params() + int64_t(c.vocab) * c.hidden);
    const ParamLayout middle = ParamLayout::build(c, 1, 3);
    CHECK(middle.embedding_unit() == -1);
    CHECK(middle.final_unit() == -1);
}

TEST_CASE("full-model gradients match finite differences (fp32)", "[cpu][model][gradcheck]") {
    ModelOptions mo;
    mo.micro_batch = 2;
    Replica r(tiny_config(), mo);
    const int N = mo.micro_batch * r.cfg.seq;
    const auto tok = tokens_for(N, r.cfg.vocab, 1), tgt = tokens_for(N, r.cfg.vocab, 2);
    auto loss = [&] {
        ChunkActivations acts;
        r.model.forward(acts, {tok.data(), tgt.data()}, Tensor{}, r.state);
        return acts.loss_sum / N;
    };
    ChunkActivations acts;
    r.state.begin_step();
    r.state.begin_backward(0, true);
    r.model.forward(acts, {tok.data(), tgt.data()}, Tensor{}, r.state);
    r.model.backward(acts, Tensor{}, Tensor{}, 1.0f, r.state);
    const Tensor params = r.state.params(), grads = r.state.grads_buffer();
    std::vector<float> p(params.f32(), params.f32() + params.numel);
    for (const ParamTensor& t : r.layout.tensors()) {
        std::vector<float> x(p.begin() + t.offset, p.begin() + t.offset + t.numel);
        std::vector<float> g(grads.f32() + t.offset, grads.f32() + t.offset + t.numel);
        auto loss_at = [&] {
            std::copy(x.begin(), x.end(), params.f32() + t.offset);
            return loss();
        };
        check_gradient(t.name.c_str(), x, g, loss_at, {.eps = 2e-3, .atol = 2e-4, .rtol = 1e-2, .samples = 6});
        std::copy(x.begin(), x.end(), params.f32() + t.offset);
    }
}

TEST_CASE("recomputation changes memory, not gradients", "[cpu][model]") {
    std::vector<float> reference;
    for (Recompute mode : {Recompute::none, Recompute::selective, Recompute::full}) {
        ModelOptions mo;
        mo.micro_batch = 2;
        mo.recompute = mode;
        Replica r(tiny_config(), mo);
        const int N = mo.micro_batch * r.cfg.seq;
        const auto tok = tokens_for(N, r.cfg.vocab, 3), tgt = tokens_for(N, r.cfg.vocab, 4);
        ChunkActivations acts;
        r.state.begin_step();
        r.state.begin_backward(0, true);
        r.model.forward(acts, {tok.data(), tgt.data()}, Tensor{}, r.state);
        r.model.backward(acts, Tensor{}, Tensor{}, 1.0f, r.state);
        const Tensor g = r.state.grads_buffer();
        std::vector<float> grads(g.f32(), g.f32() + g.numel);
        if (reference.empty()) {
            reference = grads;
            continue;
        }
        INFO("recompute " << recompute_name(mode));
        for (size_t i = 0; i < grads.size(); ++i) REQUIRE(grads[i] == reference[i]);
    }
}

TEST_CASE("bf16 forward and backward track fp32", "[cpu][model][bf16]") {
    ModelOptions mo;
    mo.micro_batch = 2;
    GPTConfig c = tiny_config();
    Replica r32(c, mo);
    mo.precision = Precision::bf16;
    Replica r16(c, mo);
    const int N = mo.micro_batch * c.seq;
    const auto tok = tokens_for(N, c.vocab, 5), tgt = tokens_for(N, c.vocab, 6);
    double losses[2];
    std::vector<float> grads[2];
    int i = 0;
    for (Replica* r : {&r32, &r16}) {
        ChunkActivations acts;
        r->state.begin_step();
        r->state.begin_backward(0, true);
        r->model.forward(acts, {tok.data(), tgt.data()}, Tensor{}, r->state);
        losses[i] = acts.loss_sum / N;
        r->model.backward(acts, Tensor{}, Tensor{}, 1.0f, r->state);
        grads[i].resize(size_t(r->layout.total()));
        download_converted(r->be, grads[i].data(), r->state.grads_buffer());
        ++i;
    }
    CHECK(losses[1] == Approx(losses[0]).epsilon(1e-2));
    double num = 0, den = 0;
    for (size_t k = 0; k < grads[0].size(); ++k) {
        num += std::pow(double(grads[1][k]) - grads[0][k], 2);
        den += std::pow(double(grads[0][k]), 2);
    }
    CHECK(std::sqrt(num / den) < 3e-2);  // relative L2 error of the whole gradient
}
