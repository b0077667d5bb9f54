// A Backend that records a span per op (with its class and FLOPs) and forwards to the real backend. The model and
// the backends stay free of instrumentation; the trainer wraps the backend only when profiling is on. On an async
// backend (CUDA) the spans are host-side launches and go to the host lane; kernel times come from CUPTI.
#pragma once

#include <memory>

#include "engine/backend/backend.h"

namespace us {

class ProfiledBackend final : public Backend {
public:
    explicit ProfiledBackend(Backend& inner) : m_inner(inner) {}
    std::string_view name() const override { return m_inner.name(); }
    std::string device_description() const override { return m_inner.device_description(); }
    TrackedAllocator& allocator() override { return m_inner.allocator(); }
    bool is_async() const override { return m_inner.is_async(); }
    DevicePeak peak_flops(bool bf16) const override { return m_inner.peak_flops(bf16); }
    int64_t device_used_bytes() const override { return m_inner.device_used_bytes(); }
    Backend& inner() { return m_inner; }

    void gemm(const GemmArgs& args) override;
    void add_bias(Tensor out, Tensor bias, int N, int OC) override;
    void linear_forward(const GemmArgs& args, Tensor residual, Tensor bias) override;
    void bias_backward(Tensor dbias, Tensor dout, int N, int OC) override;
    void layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor inp, Tensor weight, Tensor bias, int N,
                           int C) override;
    void layernorm_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp, Tensor weight,
                            Tensor mean, Tensor rstd, int N, int C) override;
    void gelu_forward(Tensor out, Tensor inp) override;
    void gelu_backward(Tensor dinp, Tensor inp, Tensor dout) override;
    void rope_forward(Tensor qkv, int B, int T, int NH, int HD, Tensor positions) override;
    void rope_backward(Tensor dqkv, int B, int T, int NH, int HD, Tensor positions) override;
    void attention_forward(Tensor out, Tensor probs, Tensor qkv, int B, int T, int NH, int HD) override;
    void attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor probs, int B, int T, int NH,
                            int HD) override;
    void attention_block_forward(const AttentionBlockArgs& a, Tensor acc, Tensor row_max, Tensor row_sum) override;
    void attention_block_finish(Tensor out, Tensor lse, Tensor acc, Tensor row_max, Tensor row_sum, int B, int T, int NH,
                                int HD) override;
    void attention_block_delta(Tensor delta, Tensor dout, Tensor out, int B, int T, int NH, int HD) override;
    void attention_block_backward(const AttentionBlockArgs& a, Tensor dq, Tensor dkv, Tensor dout, Tensor lse,
                                  Tensor delta) override;
    void attention_block_pack_kv(Tensor kv, Tensor qkv, int B, int T, int C) override;
    void attention_block_store_grads(Tensor dqkv, Tensor dq, Tensor dkv, int B, int T, int C) override;
    void moe_route(Tensor probs, Tensor topk, Tensor gates, int N, int E, int K) override;
    void moe_route_backward(Tensor dlogits, Tensor probs, Tensor topk, Tensor gates, Tensor dgates, Tensor aux, int N,
                            int E, int K, int tokens_per_seq) override;
    void moe_dispatch(Tensor out, Tensor x, Tensor rows, int N, int K, int C) override;
    void moe_dispatch_backward(Tensor dx, Tensor dout, Tensor rows, int N, int K, int C) override;
    void moe_combine(Tensor out, Tensor y, Tensor rows, Tensor gates, int N, int K, int C) override;
    void moe_combine_backward(Tensor dy, Tensor dgates, Tensor dout, Tensor y, Tensor rows, Tensor gates, int N, int K,
                              int C) override;
    void gather_rows(Tensor dst, Tensor src, Tensor index, int M, int C) override;
    void residual_forward(Tensor out, Tensor a, Tensor b) override;
    void fill_zero(Tensor t) override;
    void copy(Tensor dst, Tensor src) override;
    void accumulate(Tensor acc, Tensor x) override;
    void scale(Tensor t, float factor) override;
    double sum(Tensor t) override;
    double sum_squares(Tensor t) override;
    void embedding_forward(Tensor out, Tensor tokens, Tensor wte, int N, int C, int vocab_begin, int V) override;
    void embedding_backward(Tensor dwte, Tensor dout, Tensor tokens, int N, int C, int vocab_begin, int V) override;
    void crossentropy_forward(Tensor losses, Tensor logits, Tensor targets, int N, int V) override;
    void crossentropy_backward(Tensor dlogits, Tensor probs, Tensor targets, float dloss, int N, int V,
                               int vocab_begin) override;
    void crossentropy_local_max(Tensor rowmax, Tensor logits, int N, int V, int valid) override;
    void crossentropy_local_sums(Tensor sums, Tensor logits, Tensor rowmax, Tensor targets, int N, int V, int valid,
                                 int vocab_begin) override;
    void crossentropy_finish(Tensor losses, Tensor logits, Tensor rowmax, Tensor sums, int N, int V,
                             int valid) override;
    void adamw(const AdamWArgs& args) override;
    void upload(Tensor dst, const void* host) override;
    void download(void* host, Tensor src) override;
    void synchronize() override { m_inner.synchronize(); }
    void set_progress_hook(void (*hook)()) override { m_inner.set_progress_hook(hook); }

private:
    Backend& m_inner;
};

}  // namespace us
