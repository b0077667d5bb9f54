// The CPU backend: GEMMs through OpenBLAS (fp32) or the AVX-512 BF16 kernel (bf16), every other op a plain loop
// parallelised with OpenMP. One file per op beside this one, with the same names as the CUDA backend's files.
#pragma once

#include <string>

#include "engine/backend/backend.h"

namespace us {

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(int threads);
    std::string_view name() const override { return "cpu"; }
    std::string device_description() const override;
    int threads() const { return m_threads; }

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

    // Scratch memory for ops (per-thread attention tiles, bf16 GEMM packing): one tracked `workspace`
    // allocation that only ever grows, so the steady state allocates nothing.
    float* scratch(size_t floats);

    // The cos/sin table for RoPE at positions [0, T), dims [0, HD/2): (T, HD/2) each, built once per shape.
    const float* rope_table(int T, int HD);

private:
    int m_threads;
    Allocation m_scratch;
    Allocation m_rope;
    int m_rope_T = 0, m_rope_HD = 0;
};

}  // namespace us
