#include "engine/backend/profiled_backend.h"

#include "profiler/record/zones.h"

namespace us {

namespace {

using prof::OpClass;

// The span of one op: on the compute lane, or the host lane for launches on an async backend. A caller's name
// (US_PROF_OP_NAME) wins over the op's own. With a device collector attached (CUPTI), the op is bracketed for it
// so that the kernels it launches are attributed to the op, its layer and its micro-batch.
class OpSpan {
public:
    OpSpan(const Backend& be, OpClass op, uint32_t own_name, uint64_t flops = 0, uint64_t bytes = 0)
        : m_active(prof::enabled()) {
        if (!m_active) return;
        m_lane = be.is_async() ? prof::Lane::host : prof::Lane::compute;
        m_op = op;
        const uint32_t caller = prof::context().op_name;
        m_name = caller != UINT32_MAX ? caller : own_name;
        m_flops = flops;
        m_bytes = bytes;
        if ((m_hooks = prof::op_hooks())) m_hooks->enter(prof::current_op_tag(m_op, m_name));
        m_begin = prof::read_ticks();
    }
    ~OpSpan() {
        if (!m_active) return;
        prof::record_span(m_lane, prof::SpanKind::op, m_op, m_name, m_begin, prof::read_ticks(), m_flops, m_bytes);
        if (m_hooks) m_hooks->exit();
    }

private:
    bool m_active;
    prof::Lane m_lane = prof::Lane::compute;
    OpClass m_op = OpClass::none;
    uint32_t m_name = 0;
    uint64_t m_flops = 0, m_bytes = 0;
    int64_t m_begin = 0;
    const prof::OpHooks* m_hooks = nullptr;
};

#if ULTRASCOPE_PROFILE
#define US_OP_SPAN(op, literal, ...) OpSpan us_op_span(m_inner, OpClass::op, US_PROF_NAME(literal), ##__VA_ARGS__)
#else
#define US_OP_SPAN(op, literal, ...) (void)0
#endif

uint64_t attention_flops(int B, int T, int NH, int HD, int products) {
    return uint64_t(products) * 2ull * uint64_t(B) * NH * uint64_t(T) * T * HD;
}

}  // namespace

void ProfiledBackend::gemm(const GemmArgs& g) {
    US_OP_SPAN(gemm, "gemm", 2ull * uint64_t(g.m) * uint64_t(g.n) * uint64_t(g.k));
    m_inner.gemm(g);
}
// One span of the GEMM's class and FLOPs: the additions folded in are the GEMM's output pass.
void ProfiledBackend::linear_forward(const GemmArgs& g, Tensor residual, Tensor bias) {
    US_OP_SPAN(gemm, "gemm", 2ull * uint64_t(g.m) * uint64_t(g.n) * uint64_t(g.k));
    m_inner.linear_forward(g, residual, bias);
}
void ProfiledBackend::add_bias(Tensor out, Tensor bias, int N, int OC) {
    US_OP_SPAN(activation, "add_bias");
    m_inner.add_bias(out, bias, N, OC);
}
void ProfiledBackend::bias_backward(Tensor dbias, Tensor dout, int N, int OC) {
    US_OP_SPAN(activation, "bias_backward");
    m_inner.bias_backward(dbias, dout, N, OC);
}
void ProfiledBackend::layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor inp, Tensor weight, Tensor bias,
                                        int N, int C) {
    US_OP_SPAN(norm, "layernorm");
    m_inner.layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
}
void ProfiledBackend::layernorm_backward(Tensor dinp, Tensor dweight, Tensor dbias, Tensor dout, Tensor inp,
                                         Tensor weight, Tensor mean, Tensor rstd, int N, int C) {
    US_OP_SPAN(norm, "layernorm backward");
    m_inner.layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}
void ProfiledBackend::gelu_forward(Tensor out, Tensor inp) {
    US_OP_SPAN(activation, "gelu");
    m_inner.gelu_forward(out, inp);
}
void ProfiledBackend::gelu_backward(Tensor dinp, Tensor inp, Tensor dout) {
    US_OP_SPAN(activation, "gelu backward");
    m_inner.gelu_backward(dinp, inp, dout);
}
void ProfiledBackend::rope_forward(Tensor qkv, int B, int T, int NH, int HD, Tensor positions) {
    US_OP_SPAN(attention, "rope");
    m_inner.rope_forward(qkv, B, T, NH, HD, positions);
}
void ProfiledBackend::rope_backward(Tensor dqkv, int B, int T, int NH, int HD, Tensor positions) {
    US_OP_SPAN(attention, "rope backward");
    m_inner.rope_backward(dqkv, B, T, NH, HD, positions);
}
// A chunk pair's products: (chunk x chunk x HD) each, per batch row and head.
static uint64_t block_flops(const AttentionBlockArgs& a, int products) {
    return uint64_t(products) * 2ull * uint64_t(a.B) * a.NH * uint64_t(a.chunk) * a.chunk * a.HD *
           uint64_t(a.pair_count);
}
void ProfiledBackend::attention_block_forward(const AttentionBlockArgs& a, Tensor acc, Tensor row_max, Tensor row_sum) {
    US_OP_SPAN(attention, "attention block", block_flops(a, 2));
    m_inner.attention_block_forward(a, acc, row_max, row_sum);
}
void ProfiledBackend::attention_block_finish(Tensor out, Tensor lse, Tensor acc, Tensor row_max, Tensor row_sum, int B,
                                             int T, int NH, int HD) {
    US_OP_SPAN(attention, "attention blocks: normalise");
    m_inner.attention_block_finish(out, lse, acc, row_max, row_sum, B, T, NH, HD);
}
void ProfiledBackend::attention_block_delta(Tensor delta, Tensor dout, Tensor out, int B, int T, int NH, int HD) {
    US_OP_SPAN(attention, "attention blocks: delta");
    m_inner.attention_block_delta(delta, dout, out, B, T, NH, HD);
}
void ProfiledBackend::attention_block_backward(const AttentionBlockArgs& a, Tensor dq, Tensor dkv, Tensor dout,
                                               Tensor lse, Tensor delta) {
    US_OP_SPAN(attention, "attention block backward", block_flops(a, 5));  // the scores again, dV, dP, dQ, dK
    m_inner.attention_block_backward(a, dq, dkv, dout, lse, delta);
}
// A GEMM with the GeLU in its epilogue: one span of the GEMM's class and FLOPs (the model calls these only where the
// backend fuses them; otherwise it calls the GEMM and the GeLU, each with its span).
void ProfiledBackend::linear_gelu_forward(const GemmArgs& g, Tensor bias, Tensor pre) {
    if (!m_inner.fuses_gelu_epilogues(g.a.dtype)) return Backend::linear_gelu_forward(g, bias, pre);
    US_OP_SPAN(gemm, "gemm", 2ull * uint64_t(g.m) * uint64_t(g.n) * uint64_t(g.k));
    m_inner.linear_gelu_forward(g, bias, pre);
}
void ProfiledBackend::linear_dgelu_backward(const GemmArgs& g, Tensor pre) {
    if (!m_inner.fuses_gelu_epilogues(g.a.dtype)) return Backend::linear_dgelu_backward(g, pre);
    US_OP_SPAN(gemm, "gemm", 2ull * uint64_t(g.m) * uint64_t(g.n) * uint64_t(g.k));
    m_inner.linear_dgelu_backward(g, pre);
}
// Whole-sequence attention: one span of the fused kernels where the inner backend fuses them; otherwise Backend's
// composition runs here, so each blockwise op keeps its own span.
bool ProfiledBackend::fuses_whole_attention(const AttentionBlockArgs& a) const {
    return m_inner.fuses_whole_attention(a);
}
void ProfiledBackend::attention_whole_forward(const AttentionBlockArgs& a, Tensor out, Tensor lse) {
    if (!m_inner.fuses_whole_attention(a)) return Backend::attention_whole_forward(a, out, lse);
    US_OP_SPAN(attention, "attention block", block_flops(a, 2));
    m_inner.attention_whole_forward(a, out, lse);
}
void ProfiledBackend::attention_whole_backward(const AttentionBlockArgs& a, Tensor dqkv, Tensor dout, Tensor out,
                                               Tensor lse) {
    if (!m_inner.fuses_whole_attention(a)) return Backend::attention_whole_backward(a, dqkv, dout, out, lse);
    US_OP_SPAN(attention, "attention block backward", block_flops(a, 5));
    m_inner.attention_whole_backward(a, dqkv, dout, out, lse);
}
void ProfiledBackend::attention_block_pack_kv(Tensor kv, Tensor qkv, int B, int T, int C) {
    US_OP_SPAN(activation, "pack k, v");
    m_inner.attention_block_pack_kv(kv, qkv, B, T, C);
}
void ProfiledBackend::attention_block_store_grads(Tensor dqkv, Tensor dq, Tensor dkv, int B, int T, int C) {
    US_OP_SPAN(activation, "store dq, dk, dv");
    m_inner.attention_block_store_grads(dqkv, dq, dkv, B, T, C);
}
void ProfiledBackend::attention_forward(Tensor out, Tensor probs, Tensor qkv, int B, int T, int NH, int HD) {
    US_OP_SPAN(attention, "attention", attention_flops(B, T, NH, HD, 2));
    m_inner.attention_forward(out, probs, qkv, B, T, NH, HD);
}
void ProfiledBackend::attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor probs, int B, int T, int NH,
                                         int HD) {
    // dV, dP, dQ, dK, plus the scores again when the probabilities were not kept (selective recompute)
    US_OP_SPAN(attention, "attention backward", attention_flops(B, T, NH, HD, probs.empty() ? 5 : 4));
    m_inner.attention_backward(dqkv, dout, qkv, probs, B, T, NH, HD);
}
void ProfiledBackend::moe_route(Tensor probs, Tensor topk, Tensor gates, int N, int E, int K) {
    US_OP_SPAN(activation, "router: softmax, top-k");
    m_inner.moe_route(probs, topk, gates, N, E, K);
}
void ProfiledBackend::moe_route_backward(Tensor dlogits, Tensor probs, Tensor topk, Tensor gates, Tensor dgates,
                                         Tensor aux, int N, int E, int K, int tokens_per_seq) {
    US_OP_SPAN(activation, "router backward");
    m_inner.moe_route_backward(dlogits, probs, topk, gates, dgates, aux, N, E, K, tokens_per_seq);
}
void ProfiledBackend::moe_dispatch(Tensor out, Tensor x, Tensor rows, int N, int K, int C) {
    US_OP_SPAN(activation, "moe dispatch");
    m_inner.moe_dispatch(out, x, rows, N, K, C);
}
void ProfiledBackend::moe_dispatch_backward(Tensor dx, Tensor dout, Tensor rows, int N, int K, int C) {
    US_OP_SPAN(activation, "moe dispatch backward");
    m_inner.moe_dispatch_backward(dx, dout, rows, N, K, C);
}
void ProfiledBackend::moe_combine(Tensor out, Tensor y, Tensor rows, Tensor gates, int N, int K, int C) {
    US_OP_SPAN(activation, "moe combine");
    m_inner.moe_combine(out, y, rows, gates, N, K, C);
}
void ProfiledBackend::moe_combine_backward(Tensor dy, Tensor dgates, Tensor dout, Tensor y, Tensor rows, Tensor gates,
                                           int N, int K, int C) {
    US_OP_SPAN(activation, "moe combine backward");
    m_inner.moe_combine_backward(dy, dgates, dout, y, rows, gates, N, K, C);
}
void ProfiledBackend::gather_rows(Tensor dst, Tensor src, Tensor index, int M, int C) {
    US_OP_SPAN(activation, "reorder rows");
    m_inner.gather_rows(dst, src, index, M, C);
}
void ProfiledBackend::residual_forward(Tensor out, Tensor a, Tensor b) {
    US_OP_SPAN(activation, "residual");
    m_inner.residual_forward(out, a, b);
}
void ProfiledBackend::fill_zero(Tensor t) {
    US_OP_SPAN(activation, "zero");
    m_inner.fill_zero(t);
}
void ProfiledBackend::copy(Tensor dst, Tensor src) {
    US_OP_SPAN(activation, "copy");
    m_inner.copy(dst, src);
}
void ProfiledBackend::accumulate(Tensor acc, Tensor x) {
    US_OP_SPAN(activation, "accumulate");
    m_inner.accumulate(acc, x);
}
void ProfiledBackend::scale(Tensor t, float factor) {
    US_OP_SPAN(activation, "scale");
    m_inner.scale(t, factor);
}
double ProfiledBackend::sum(Tensor t) {
    US_OP_SPAN(loss, "sum");
    return m_inner.sum(t);
}
double ProfiledBackend::sum_squares(Tensor t) {
    US_OP_SPAN(optimizer, "grad norm");
    return m_inner.sum_squares(t);
}
void ProfiledBackend::sum_deferred(Tensor t) {
    US_OP_SPAN(loss, "sum");
    m_inner.sum_deferred(t);
}
double ProfiledBackend::take_deferred_sum() {
    US_OP_SPAN(loss, "loss of the step");
    return m_inner.take_deferred_sum();
}
void ProfiledBackend::embedding_forward(Tensor out, Tensor tokens, Tensor wte, int N, int C, int vocab_begin, int V) {
    US_OP_SPAN(embedding, "embedding");
    m_inner.embedding_forward(out, tokens, wte, N, C, vocab_begin, V);
}
void ProfiledBackend::embedding_backward(Tensor dwte, Tensor dout, Tensor tokens, int N, int C, int vocab_begin,
                                         int V) {
    US_OP_SPAN(embedding, "embedding backward");
    m_inner.embedding_backward(dwte, dout, tokens, N, C, vocab_begin, V);
}
void ProfiledBackend::crossentropy_forward(Tensor losses, Tensor logits, Tensor targets, int N, int V) {
    US_OP_SPAN(loss, "cross-entropy");
    m_inner.crossentropy_forward(losses, logits, targets, N, V);
}
void ProfiledBackend::crossentropy_backward(Tensor dlogits, Tensor probs, Tensor targets, float dloss, int N, int V,
                                            int vocab_begin) {
    US_OP_SPAN(loss, "cross-entropy backward");
    m_inner.crossentropy_backward(dlogits, probs, targets, dloss, N, V, vocab_begin);
}
void ProfiledBackend::crossentropy_fused(Tensor losses, Tensor logits, Tensor targets, int N, int V) {
    US_OP_SPAN(loss, "cross-entropy (fused)");
    m_inner.crossentropy_fused(losses, logits, targets, N, V);
}
void ProfiledBackend::crossentropy_local_max(Tensor rowmax, Tensor logits, int N, int V, int valid) {
    US_OP_SPAN(loss, "vocab-parallel softmax max");
    m_inner.crossentropy_local_max(rowmax, logits, N, V, valid);
}
void ProfiledBackend::crossentropy_local_sums(Tensor sums, Tensor logits, Tensor rowmax, Tensor targets, int N, int V,
                                              int valid, int vocab_begin) {
    US_OP_SPAN(loss, "vocab-parallel softmax sums");
    m_inner.crossentropy_local_sums(sums, logits, rowmax, targets, N, V, valid, vocab_begin);
}
void ProfiledBackend::crossentropy_finish(Tensor losses, Tensor logits, Tensor rowmax, Tensor sums, int N, int V,
                                          int valid) {
    US_OP_SPAN(loss, "vocab-parallel cross-entropy");
    m_inner.crossentropy_finish(losses, logits, rowmax, sums, N, V, valid);
}
void ProfiledBackend::adamw(const AdamWArgs& args) {
    US_OP_SPAN(optimizer, "adamw", 0, uint64_t(args.params.numel) * 16);
    m_inner.adamw(args);
}
void ProfiledBackend::upload(Tensor dst, const void* host) {
    US_OP_SPAN(activation, "upload");
    m_inner.upload(dst, host);
}
void ProfiledBackend::download(void* host, Tensor src) {
    US_OP_SPAN(activation, "download");
    m_inner.download(host, src);
}

}  // namespace us
