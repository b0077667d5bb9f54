#include "engine/model/gpt.h"

#include <fmt/format.h>

#include "common/core/intern.h"
#include "engine/model/gpt_linears.h"
#include "profiler/record/zones.h"

namespace us {

namespace {

uint32_t linear_name(int which, int pass) {
    static const auto ids = [] {
        std::array<std::array<uint32_t, 3>, kLinearCount> t{};
        for (int i = 0; i < kLinearCount; ++i)
            for (int j = 0; j < 3; ++j) t[size_t(i)][size_t(j)] = prof::string_id(kLinearNames[i][j]);
        return t;
    }();
    return ids[size_t(which)][size_t(pass)];
}

}  // namespace

GPT::GPT(const GPTConfig& config, const ModelOptions& options, Backend& backend, const ParamLayout& layout,
         int layer_begin, int layer_end)
    : m_config(config),
      m_options(options),
      m_be(backend),
      m_tp(options.tensor_parallel ? *options.tensor_parallel : m_no_tp),
      m_cp(options.context_parallel && options.context_parallel->active() ? options.context_parallel : nullptr),
      m_layout(layout),
      m_begin(layer_begin >= 0 ? layer_begin : layout.chunks().front().first),
      m_end(layer_end >= 0 ? layer_end : layout.chunks().front().second) {
    US_ASSERT(m_tp.size() == layout.tp().tp, "the model's tensor-parallel group ({}) and its layout's tp ({}) differ",
              m_tp.size(), layout.tp().tp);
    m_shape.B = options.micro_batch;
    m_shape.T = m_cp ? m_cp->local_seq() : config.seq;
    m_shape.cp = m_cp ? m_cp->size() : 1;
    m_shape.flash = attention_blockwise(options.attention);
    if (m_shape.flash && !m_cp) {
        m_flash_group = make_local_communicator(GroupKind::cp);
        m_flash =
            std::make_unique<ContextParallel>(*m_flash_group, CpBalance::contiguous, CpComm::ring, config.seq, backend);
    }
    m_shape.C = config.hidden;
    m_shape.NH = config.heads;
    m_shape.V = layout.vocab_rows();
    m_shape.tp = m_tp.size();
    m_shape.sp = m_tp.sp();
    m_shape.dtype = compute_dtype(options.precision);
    for (int l = 0; l < config.layers; ++l) m_block_names.push_back(prof::string_id(fmt::format("block {}", l)));
    if (config.is_moe()) {
        US_ASSERT(options.expert_layout, "an MoE model needs its experts' layout");
        m_shape.E = config.moe_experts;
        m_shape.K = config.moe_topk;
        ExpertExchange* exchange = options.expert_exchange;
        if (!exchange) {
            m_local_experts = std::make_unique<LocalExperts>(config.moe_experts);
            exchange = m_local_experts.get();
        }
        MoeConfig mc;
        mc.E = config.moe_experts, mc.K = config.moe_topk;
        mc.capacity_factor = options.moe_capacity_factor, mc.aux_coef = options.moe_aux_loss_coef;
        mc.tp = m_tp.size(), mc.tp_rank = m_tp.rank();
        mc.tp_group = m_tp.group();
        m_moe = std::make_unique<MoeLayer>(mc, backend, *exchange, m_cp ? m_cp->group() : nullptr);
        reset_moe_stats();
    }
}

void GPT::reset_moe_stats() {
    m_moe_stats.assign(size_t(m_config.layers), MoeStats{});
    for (int l = 0; l < m_config.layers; ++l)
        if (is_moe(l)) m_moe_stats[size_t(l)].routed.assign(size_t(m_config.moe_experts), 0);
}

// out (N,OC) = inp (N,IC) @ weight^T + residual + bias, weight (OC,IC); residual and bias optional.
void GPT::matmul_forward(int which, Tensor out, Tensor inp, Tensor weight, Tensor bias, int IC, int OC,
                         Tensor residual) {
    US_PROF_OP_NAME(linear_name(which, 0));
    const int N = int(m_shape.N());
    GemmArgs g;
    g.trans_b = true;
    g.m = N, g.n = OC, g.k = IC;
    g.a = inp, g.lda = IC;
    g.b = weight, g.ldb = IC;
    g.c = out, g.ldc = OC;
    m_be.linear_forward(g, residual, bias);
}

// The MLP's first layer: pre (N,OC) = inp @ weight^T + bias and out = gelu(pre), in one GEMM where the backend has
// the epilogue for it.
void GPT::matmul_gelu_forward(int which, Tensor out, Tensor pre, Tensor inp, Tensor weight, Tensor bias, int IC,
                              int OC) {
    if (!m_be.fuses_gelu_epilogues(inp.dtype)) {  // two ops, each with its own span
        matmul_forward(which, pre, inp, weight, bias, IC, OC);
        m_be.gelu_forward(out, pre);
        return;
    }
    US_PROF_OP_NAME(linear_name(which, 0));
    const int N = int(m_shape.N());
    GemmArgs g;
    g.trans_b = true;
    g.m = N, g.n = OC, g.k = IC;
    g.a = inp, g.lda = IC;
    g.b = weight, g.ldb = IC;
    g.c = out, g.ldc = OC;
    m_be.linear_gelu_forward(g, bias, pre);
}

// dinp (N,IC) = gelu'(pre) * (dout @ weight): the input gradient of the layer after the GeLU, through the GeLU.
void GPT::matmul_dgelu_backward(int which, Tensor dinp, Tensor pre, Tensor dout, Tensor weight, int IC, int OC) {
    if (!m_be.fuses_gelu_epilogues(dout.dtype)) {
        matmul_backward_input(which, dinp, Tensor{}, dout, weight, IC, OC);
        m_be.gelu_backward(dinp, pre, dinp);
        return;
    }
    const int N = int(m_shape.N());
    US_PROF_OP_NAME(linear_name(which, 1));
    GemmArgs gi;
    gi.m = N, gi.n = IC, gi.k = OC;
    gi.a = dout, gi.lda = OC;
    gi.b = weight, gi.ldb = IC;
    gi.c = dinp, gi.ldc = IC;
    m_be.linear_dgelu_backward(gi, pre);
}

// dinp (N,IC) = dout @ weight; dbias (OC) += column sums of dout (when given).
void GPT::matmul_backward_input(int which, Tensor dinp, Tensor dbias, Tensor dout, Tensor weight, int IC, int OC) {
    const int N = int(m_shape.N());
    US_PROF_OP_NAME(linear_name(which, 1));
    GemmArgs gi;
    gi.m = N, gi.n = IC, gi.k = OC;
    gi.a = dout, gi.lda = OC;
    gi.b = weight, gi.ldb = IC;
    gi.c = dinp, gi.ldc = IC;
    m_be.gemm(gi);
    if (!dbias.empty()) m_be.bias_backward(dbias, dout, N, OC);
}

// dweight (OC,IC) += dout^T @ inp
void GPT::matmul_backward_weight(int which, Tensor dweight, Tensor dout, Tensor inp, int IC, int OC) {
    const int N = int(m_shape.N());
    US_PROF_OP_NAME(linear_name(which, 2));
    GemmArgs gw;
    gw.trans_a = true;
    gw.m = OC, gw.n = IC, gw.k = N;
    gw.beta = 1.0f;
    gw.a = dout, gw.lda = OC;
    gw.b = inp, gw.ldb = IC;
    gw.c = dweight, gw.ldc = IC;
    m_be.gemm(gw);
}

// Without tensor parallelism the residual is the GEMM's accumulator. Under it each rank's product is a partial sum
// over its heads (or its share of the MLP): reduce it over the group (reduce_from_tp_region, or scattered by rows
// with reduce_scatter_to_sp_region), then add the residual and the bias, which every rank holds whole.
void GPT::row_parallel_forward(int which, Tensor out, Tensor residual, Tensor inp, Tensor weight, Tensor bias, int IC,
                               Tensor whole) {
    const int C = m_shape.C;
    if (!m_tp.active()) {
        matmul_forward(which, out, inp, weight, bias, IC, C, residual);
        return;
    }
    const Tensor partial = m_tp.sp() ? whole : out;  // (N,C)
    matmul_forward(which, partial, inp, weight, Tensor{}, IC, C);
    m_tp.row_output_forward(partial, out);
    m_be.accumulate(out, residual);
    m_be.add_bias(out, bias, int(m_shape.rows()), C);
}

// ---------------------------------------------------------------------------------------------------------------
// [SECTION] forward

void GPT::block_forward(int layer, BlockActs& a, Tensor x, ParamAccess& params, Tensor whole, MoeActs* moe,
                        MoeStats* stats) {
    const int R = int(m_shape.rows()), C = m_shape.C, Ca = int(m_shape.Ca()), F = int(m_shape.F());
    const int NH = m_shape.heads(), HD = C / m_shape.NH;
    const BlockParams p = block_params(params.weights(m_layout.block_unit(layer)), C, m_shape.tp,
                                       is_moe(layer) ? m_config.moe_experts : 0);
    // attention branch: residual2 = x + c_proj(attention(rope(c_attn(ln_1(x)))))
    m_be.layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, p.ln1_w, p.ln1_b, R, C);
    const Tensor ln1 = m_tp.column_input_forward(a.ln1, whole);     // (N,C)
    matmul_forward(kQkv, a.qkv, ln1, p.qkv_w, p.qkv_b, C, 3 * Ca);  // (N,3Ca): the rank's heads
    m_be.rope_forward(a.qkv, m_shape.B, m_shape.T, NH, HD, positions());
    attention_forward(a);  // (N,Ca)
    row_parallel_forward(kAttnProj, a.residual2, x, a.atty, p.attproj_w, p.attproj_b, Ca, whole);
    // MLP branch: output = residual2 + c_proj(gelu(c_fc(ln_2(residual2)))), or the experts' for an MoE block
    m_be.layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.residual2, p.ln2_w, p.ln2_b, R, C);
    if (is_moe(layer)) {
        moe_forward(layer, a, p, params, whole, *moe, *stats);
        return;
    }
    const Tensor ln2 = m_tp.column_input_forward(a.ln2, whole);              // (N,C)
    matmul_gelu_forward(kFc, a.fch_gelu, a.fch, ln2, p.fc_w, p.fc_b, C, F);  // (N,F), and gelu of it
    row_parallel_forward(kFcProj, a.output, a.residual2, a.fch_gelu, p.fcproj_w, p.fcproj_b, F, whole);
}

Tensor GPT::positions() const { return m_cp ? m_cp->positions() : Tensor{}; }

// output = residual2 + the experts' mixture of ln_2(residual2). The router and the dispatch read all N rows
// (gathered under sequence parallelism); the experts' outputs are partial sums under tensor parallelism (their
// matrices split like the MLP's), reduced (and scattered by rows with SP) as the MLP's c_proj is.
void GPT::moe_forward(int layer, BlockActs& a, const BlockParams& p, ParamAccess& params, Tensor whole, MoeActs& moe,
                      MoeStats& stats) {
    const int64_t N = m_shape.N();
    const int C = m_shape.C;
    const Tensor x = m_tp.column_input_forward(a.ln2, whole);  // (N,C)
    const int xu = expert_unit(layer);
    params.acquire(xu, Pass::forward);
    Allocation partial_storage;
    Tensor out = a.output;  // without tp the residual is the accumulator
    if (!m_tp.active()) {
        m_be.copy(a.output, a.residual2);
    } else if (!m_tp.sp()) {
        m_be.fill_zero(a.output);
    } else {  // the gathered input stays live until the dispatch: a partial sum of its own
        partial_storage = m_be.allocator().allocate(size_t(N * C) * dtype_size(m_shape.dtype), MemCategory::temporaries,
                                                    "moe output (partial over tp)");
        out = partial_storage.view(m_shape.dtype, 0, N * C);
        m_be.fill_zero(out);
    }
    m_moe->forward(moe, x, p, params.weights(xu), a.moe_probs, a.moe_topk, a.moe_gates, a.moe_rows, out, m_shape.B,
                   m_shape.T, m_config.seq, stats);
    params.release(xu, Pass::forward);
    if (m_tp.active()) {
        m_tp.row_output_forward(out, a.output);
        m_be.accumulate(a.output, a.residual2);
    }
}

void GPT::moe_backward(int layer, BlockActs& a, const BlockParams& p, const BlockParams& d, BackwardScratch& s,
                       ParamAccess& params, MoeActs& moe, float grad_scale) {
    const int64_t N = m_shape.N(), R = m_shape.rows();
    const int C = m_shape.C;
    const int xu = expert_unit(layer);
    params.acquire(xu, Pass::backward);
    Allocation router_storage = m_be.allocator().allocate(size_t(N * C) * dtype_size(m_shape.dtype),
                                                          MemCategory::temporaries, "moe router input gradient");
    const Tensor router_dx = router_storage.view(m_shape.dtype, 0, N * C);
    const Tensor dout = m_tp.row_output_backward(s.dres, s.dfull);  // (N,C)
    m_be.fill_zero(s.dC);
    m_moe->backward(
        moe, dout, [&] { return m_tp.column_input_forward(a.ln2, s.dfull); }, p, d, params.weights(xu),
        params.grads(xu), a.moe_probs, a.moe_topk, a.moe_gates, a.moe_rows, s.dC, router_dx, m_shape.B, m_shape.T,
        m_config.seq, grad_scale);
    params.release(xu, Pass::backward);
    params.grads_done(xu);
    // The experts' share of ln_2's gradient is partial over tp; the router's is whole on every rank (it saw all
    // rows): added after the reduction, this rank's rows of it.
    const Tensor dln = m_tp.column_input_backward(s.dC, s.dln);  // (R,C)
    m_be.accumulate(dln, router_dx.slice(m_tp.sp() ? int64_t(m_tp.rank()) * R * C : 0, R * C));
    m_be.layernorm_backward(s.dres, d.ln2_w, d.ln2_b, dln, a.residual2, p.ln2_w, a.ln2_mean, a.ln2_rstd, int(R), C);
}

void GPT::attention_forward(BlockActs& a) {
    const int NH = m_shape.heads(), HD = m_shape.C / m_shape.NH;
    if (ContextParallel* blockwise = m_cp ? m_cp : m_flash.get())
        blockwise->attention_forward(a.atty, a.lse, a.qkv, m_shape.B, NH, HD);
    else
        m_be.attention_forward(a.atty, a.probs, a.qkv, m_shape.B, m_shape.T, NH, HD);
}

void GPT::attention_backward(Tensor dqkv, Tensor datty, const BlockActs& a) {
    const int NH = m_shape.heads(), HD = m_shape.C / m_shape.NH;
    if (ContextParallel* blockwise = m_cp ? m_cp : m_flash.get())
        blockwise->attention_backward(dqkv, datty, a.atty, a.lse, a.qkv, m_shape.B, NH, HD);
    else
        m_be.attention_backward(dqkv, datty, a.qkv, a.probs, m_shape.B, m_shape.T, NH, HD);
}

BlockActs GPT::view_block(const ChunkActivations& acts, int index) const {
    BlockActs a;
    carve_block(a, acts.blocks[size_t(index)], m_shape, m_options.recompute, BlockPart::saved, is_moe(m_begin + index));
    return a;
}

// Under tensor parallelism the embedding is vocabulary-parallel: each rank looks up the tokens of its slice of the
// vocabulary (zeros for the others), and the partial embeddings are summed over the group like a row-parallel
// output (reduce_from_tp_region, or reduce_scatter_to_sp_region).
void GPT::embedding_forward(ChunkActivations& acts, ParamAccess& params, Tensor whole) {
    const int64_t N = m_shape.N(), R = m_shape.rows();
    const int C = m_shape.C;
    const int unit = m_layout.embedding_unit();
    acts.embedding =
        m_be.allocator().allocate(size_t(embedding_saved_bytes(m_shape)), MemCategory::activations, "embedding output");
    acts.input = acts.embedding.view(m_shape.dtype, 0, R * C);
    US_PROF_ZONE(prof::Lane::compute, prof::SpanKind::layer, prof::OpClass::none, US_PROF_NAME("embedding"));
    params.acquire(unit, Pass::forward);
    const Tensor tokens = acts.tokens.view(DType::i32, 0, N);
    const Tensor partial = m_tp.sp() ? whole : acts.input;  // (N,C)
    m_be.embedding_forward(partial, tokens, embedding_params(params.weights(unit)).wte, int(N), C,
                           m_layout.vocab_begin(), m_layout.vocab_rows());
    params.release(unit, Pass::forward);
    if (m_tp.active()) m_tp.row_output_forward(partial, acts.input);
}

void GPT::forward(ChunkActivations& acts, const MicroBatch& batch, Tensor input, ParamAccess& params) {
    const int64_t N = m_shape.N(), R = m_shape.rows();
    const int C = m_shape.C;
    TrackedAllocator& alloc = m_be.allocator();

    acts.tokens = alloc.allocate(size_t(2 * N) * 4, MemCategory::activations, "tokens");
    const Tensor tokens = acts.tokens.view(DType::i32, 0, N), targets = acts.tokens.view(DType::i32, N, N);
    m_be.upload(tokens, batch.tokens);
    m_be.upload(targets, batch.targets);
    // Sequence parallelism gathers LayerNorm outputs and scatters row-parallel outputs through one (N,C) buffer.
    Allocation whole_storage;
    Tensor whole;
    if (m_tp.sp()) {
        whole_storage = alloc.allocate(size_t(forward_temporaries_bytes(m_shape)), MemCategory::temporaries,
                                       "sequence-parallel gathered rows");
        whole = whole_storage.view(m_shape.dtype, 0, N * C);
    }

    if (has_embedding()) {
        embedding_forward(acts, params, whole);
    } else {
        US_ASSERT(input.numel == R * C, "chunk input has {} elements, expected {}", input.numel, R * C);
        acts.input = input;
    }

    Tensor x = acts.input;
    const int first = m_begin, count = m_end - m_begin;
    acts.blocks.resize(size_t(count));
    acts.moe.resize(size_t(count));
    const bool full = m_options.recompute == Recompute::full;
    for (int i = 0; i < count; ++i) {
        const int layer = first + i, unit = m_layout.block_unit(layer);
        const bool moe = is_moe(layer);
        US_PROF_LAYER(layer);
        US_PROF_ZONE(prof::Lane::compute, prof::SpanKind::layer, prof::OpClass::none, m_block_names[size_t(layer)]);
        acts.blocks[size_t(i)] = alloc.allocate(size_t(block_saved_bytes(m_shape, m_options.recompute, moe)),
                                                MemCategory::activations, fmt::format("block {}", layer));
        BlockActs a = view_block(acts, i);
        Allocation working;
        if (full) {
            working = alloc.allocate(size_t(block_working_bytes(m_shape, Recompute::full, moe)),
                                     MemCategory::activations, "recompute working set");
            carve_block(a, working, m_shape, Recompute::full, BlockPart::working, moe);
        }
        params.acquire(unit, Pass::forward);
        MoeActs recomputed;  // full recomputation keeps no routed rows: backward routes again
        block_forward(layer, a, x, params, whole, full ? &recomputed : &acts.moe[size_t(i)],
                      moe ? &m_moe_stats[size_t(layer)] : nullptr);
        params.release(unit, Pass::forward);
        x = a.output;
    }
    if (has_head()) head_forward(acts, x, params, whole);
}

Tensor GPT::output(const ChunkActivations& acts) const {
    if (acts.blocks.empty()) return acts.input;
    return view_block(acts, int(acts.blocks.size()) - 1).output;
}

namespace {
struct HeadActs {
    Tensor lnf;     // (R,C)
    Tensor mean;    // (R) fp32
    Tensor rstd;    // (R) fp32
    Tensor logits;  // (N,Vr) fp32: logits, then probabilities, then dlogits; bf16 when fused_head_loss: logits,
                    // then (probs - onehot), the forward's work
    Tensor losses;  // (N) fp32
    Tensor rowmax;  // (N) fp32, vocabulary-parallel only: the softmax's maximum over the whole vocabulary
    Tensor sums;    // (N,2) fp32, vocabulary-parallel only: sum of exponentials, the target's logit
};
HeadActs carve_head(const Allocation& storage, const ActivationShape& s) {
    const int64_t N = s.N(), R = s.rows();
    char* p = static_cast<char*>(storage.data());
    HeadActs h;
    h.mean = Tensor::of(reinterpret_cast<float*>(p), R);
    h.rstd = Tensor::of(reinterpret_cast<float*>(p) + R, R);
    h.losses = Tensor::of(reinterpret_cast<float*>(p) + 2 * R, N);
    const bool fused = fused_head_loss(s);
    h.logits = Tensor::of(p + (2 * R + N) * 4, fused ? DType::bf16 : DType::f32, N * s.V);
    int64_t floats = 2 * R + N + (fused ? (N * s.V + 1) / 2 : N * s.V);  // bf16 logits: whole floats
    if (s.tp > 1) {
        h.rowmax = Tensor::of(reinterpret_cast<float*>(p) + floats, N);
        h.sums = Tensor::of(reinterpret_cast<float*>(p) + floats + N, 2 * N);
        floats += 3 * N;
    }
    h.lnf = Tensor::of(p + floats * 4, s.dtype, R * s.C);
    return h;
}
}  // namespace

Tensor GPT::probabilities(const ChunkActivations& acts) const {
    US_ASSERT(has_head() && acts.head, "probabilities exist after the last chunk's forward");
    US_ASSERT(!fused_head_loss(m_shape), "a fused loss keeps probs - onehot, not the probabilities");
    return carve_head(acts.head, m_shape).logits;
}

void GPT::head_forward(ChunkActivations& acts, Tensor x, ParamAccess& params, Tensor whole) {
    US_PROF_ZONE(prof::Lane::compute, prof::SpanKind::layer, prof::OpClass::none, US_PROF_NAME("head"));
    const int N = int(m_shape.N()), R = int(m_shape.rows()), C = m_shape.C, V = m_shape.V;
    acts.head = m_be.allocator().allocate(size_t(head_saved_bytes(m_shape)), MemCategory::activations, "head");
    const HeadActs h = carve_head(acts.head, m_shape);
    const int fin = m_layout.final_unit(), emb = m_layout.embedding_unit();
    params.acquire(fin, Pass::forward);
    params.acquire(emb, Pass::forward);
    const FinalNormParams f = final_norm_params(params.weights(fin), C);
    m_be.layernorm_forward(h.lnf, h.mean, h.rstd, x, f.lnf_w, f.lnf_b, R, C);
    const Tensor lnf = m_tp.column_input_forward(h.lnf, whole);  // (N,C)
    // logits (N,Vr) = lnf (N,C) @ wte^T: the LM head is the embedding matrix (tied), column-parallel over the
    // vocabulary under tensor parallelism; bf16 when the loss is fused, fp32 otherwise
    GemmArgs g;
    g.trans_b = true;
    g.m = N, g.n = V, g.k = C;
    g.a = lnf, g.lda = C;
    g.b = embedding_params(params.weights(emb)).wte, g.ldb = C;
    g.c = h.logits, g.ldc = V;
    {
        US_PROF_OP_NAME(US_PROF_NAME("lm_head"));
        m_be.gemm(g);
    }
    params.release(emb, Pass::forward);
    params.release(fin, Pass::forward);
    const Tensor targets = acts.tokens.view(DType::i32, N, N);
    if (fused_head_loss(m_shape)) {
        m_be.crossentropy_fused(h.losses, h.logits, targets, N, V);
    } else if (!m_tp.active()) {
        m_be.crossentropy_forward(h.losses, h.logits, targets, N, V);
    } else {
        // Vocabulary-parallel cross-entropy (Megatron-LM): the softmax over the whole vocabulary from the ranks'
        // columns with two reductions of per-token numbers, never gathering the (N, V) logits.
        const int valid = m_layout.vocab_valid();
        m_be.crossentropy_local_max(h.rowmax, h.logits, N, V, valid);
        m_tp.all_reduce_max(h.rowmax);
        m_be.crossentropy_local_sums(h.sums, h.logits, h.rowmax, targets, N, V, valid, m_layout.vocab_begin());
        m_tp.all_reduce_sum(h.sums);
        m_be.crossentropy_finish(h.losses, h.logits, h.rowmax, h.sums, N, V, valid);
    }
    if (m_defer_loss)
        m_be.sum_deferred(h.losses);
    else
        acts.loss_sum = m_be.sum(h.losses);
}

// ---------------------------------------------------------------------------------------------------------------
// [SECTION] backward

void GPT::head_backward(ChunkActivations& acts, Tensor x, BackwardScratch& s, float grad_scale, ParamAccess& params) {
    US_PROF_ZONE(prof::Lane::compute, prof::SpanKind::layer, prof::OpClass::none, US_PROF_NAME("head"));
    const int N = int(m_shape.N()), R = int(m_shape.rows()), C = m_shape.C, V = m_shape.V;
    const HeadActs h = carve_head(acts.head, m_shape);
    const int fin = m_layout.final_unit(), emb = m_layout.embedding_unit();
    const Tensor targets = acts.tokens.view(DType::i32, N, N);
    // d(mean loss): the mean is over the micro-batch's tokens on every rank of the cp group
    // the head GEMMs run in bf16 in bf16 runs, as under autocast: the gradient is written in bf16 directly, or is
    // already there (the fused loss left probs - onehot in the logits; the GEMMs scale it by d(loss))
    const float dloss = grad_scale / float(m_shape.loss_tokens());
    const bool fused = fused_head_loss(m_shape);
    const Tensor dlogits = fused ? h.logits : m_shape.dtype == DType::bf16 ? s.dlogits16 : h.logits;
    if (!fused) m_be.crossentropy_backward(dlogits, h.logits, targets, dloss, N, V, m_layout.vocab_begin());
    const float head_alpha = fused ? dloss : 1.0f;
    params.acquire(fin, Pass::backward);
    params.acquire(emb, Pass::backward);
    const Tensor wte = embedding_params(params.weights(emb)).wte;
    const Tensor dwte = embedding_params(params.grads(emb)).wte;
    // dlnf (N,C) = dlogits @ wte (a partial sum over the vocabulary under tp); dwte (Vr,C) += dlogits^T @ lnf
    GemmArgs gi;
    gi.m = N, gi.n = C, gi.k = V;
    gi.alpha = head_alpha;
    gi.a = dlogits, gi.lda = V;
    gi.b = wte, gi.ldb = C;
    gi.c = s.dC, gi.ldc = C;
    {
        US_PROF_OP_NAME(US_PROF_NAME("lm_head dX"));
        m_be.gemm(gi);
    }
    const Tensor lnf = m_tp.column_input_forward(h.lnf, s.dfull);  // re-gathered under SP
    GemmArgs gw;
    gw.trans_a = true;
    gw.m = V, gw.n = C, gw.k = N;
    gw.alpha = head_alpha;
    gw.beta = 1.0f;
    gw.a = dlogits, gw.lda = V;
    gw.b = lnf, gw.ldb = C;
    gw.c = dwte, gw.ldc = C;
    {
        US_PROF_OP_NAME(US_PROF_NAME("lm_head dW"));
        m_be.gemm(gw);
    }
    const Tensor dlnf = m_tp.column_input_backward(s.dC, s.dln);  // (R,C)
    const FinalNormParams f = final_norm_params(params.weights(fin), C);
    const FinalNormParams df = final_norm_params(params.grads(fin), C);
    m_be.fill_zero(s.dres);
    m_be.layernorm_backward(s.dres, df.lnf_w, df.lnf_b, dlnf, x, f.lnf_w, h.mean, h.rstd, R, C);
    params.release(emb, Pass::backward);
    params.release(fin, Pass::backward);
    params.grads_done(fin);
    // The embedding's gradient is complete here only when this chunk does not also embed the tokens.
    if (!has_embedding()) params.grads_done(emb);
    acts.head.reset();
}

// With `keep` (B of a split backward) the weight GEMMs are left out and their output gradients copied into it.
// Under sequence parallelism the LayerNorm outputs the weight GEMMs read are re-gathered here (Megatron keeps only
// the rank's rows of them, as the activation formula assumes), and the output gradients all-gathered.
void GPT::block_backward(int layer, BlockActs& a, Tensor x, BackwardScratch& s, ParamAccess& params,
                         const DeferredGrads* keep, MoeActs* moe, float grad_scale) {
    const int R = int(m_shape.rows()), C = m_shape.C, Ca = int(m_shape.Ca()), F = int(m_shape.F());
    const int NH = m_shape.heads(), HD = C / m_shape.NH;
    const int unit = m_layout.block_unit(layer);
    const int experts = is_moe(layer) ? m_config.moe_experts : 0;
    const BlockParams p = block_params(params.weights(unit), C, m_shape.tp, experts);
    const BlockParams d = block_params(params.grads(unit), C, m_shape.tp, experts);
    auto weight_grad = [&](int which, Tensor dweight, Tensor dout, Tensor inp, int IC, int OC, Tensor kept) {
        if (keep)
            m_be.copy(kept, dout);
        else
            matmul_backward_weight(which, dweight, dout, inp, IC, OC);
    };
    const Tensor datty = s.dC.slice(0, m_shape.N() * Ca);  // (N,Ca)
    // MLP branch (or the experts'); s.dres (R,C) holds d(output) and becomes d(residual2)
    Tensor dout;
    if (experts > 0) {
        moe_backward(layer, a, p, d, s, params, *moe, grad_scale);
    } else {
        dout = m_tp.row_output_backward(s.dres, s.dfull);                       // (N,C)
        matmul_dgelu_backward(kFcProj, s.dfch, a.fch, dout, p.fcproj_w, F, C);  // through the GeLU: d(fch)
        m_be.bias_backward(d.fcproj_b, s.dres, R, C);  // replicated bias: over this rank's rows (partial under SP)
        weight_grad(kFcProj, d.fcproj_w, dout, a.fch_gelu, F, C, keep ? keep->dout_fcproj : Tensor{});
        matmul_backward_input(kFc, s.dC, d.fc_b, s.dfch, p.fc_w, C, F);  // (N,C), partial over the tp group
        if (!keep)
            weight_grad(kFc, d.fc_w, s.dfch, m_tp.column_input_forward(a.ln2, s.dfull), C, F, Tensor{});
        else
            m_be.copy(keep->dfch, s.dfch);
        const Tensor dln = m_tp.column_input_backward(s.dC, s.dln);  // (R,C)
        m_be.layernorm_backward(s.dres, d.ln2_w, d.ln2_b, dln, a.residual2, p.ln2_w, a.ln2_mean, a.ln2_rstd, R, C);
    }
    // attention branch; s.dres becomes d(x)
    dout = m_tp.row_output_backward(s.dres, s.dfull);  // (N,C)
    matmul_backward_input(kAttnProj, datty, Tensor{}, dout, p.attproj_w, Ca, C);
    m_be.bias_backward(d.attproj_b, s.dres, R, C);
    weight_grad(kAttnProj, d.attproj_w, dout, a.atty, Ca, C, keep ? keep->dres2 : Tensor{});
    attention_backward(s.dqkv, datty, a);
    m_be.rope_backward(s.dqkv, m_shape.B, m_shape.T, NH, HD, positions());
    matmul_backward_input(kQkv, s.dC, d.qkv_b, s.dqkv, p.qkv_w, C, 3 * Ca);
    if (!keep)
        weight_grad(kQkv, d.qkv_w, s.dqkv, m_tp.column_input_forward(a.ln1, s.dfull), C, 3 * Ca, Tensor{});
    else
        m_be.copy(keep->dqkv, s.dqkv);
    const Tensor dln1 = m_tp.column_input_backward(s.dC, s.dln);
    m_be.layernorm_backward(s.dres, d.ln1_w, d.ln1_b, dln1, x, p.ln1_w, a.ln1_mean, a.ln1_rstd, R, C);
}

// The embedding's backward: the output gradient of all rows (all-gathered under SP) scattered into the rows of
// the rank's vocabulary slice.
void GPT::embedding_backward(ChunkActivations& acts, BackwardScratch& s, ParamAccess& params) {
    US_PROF_ZONE(prof::Lane::compute, prof::SpanKind::layer, prof::OpClass::none, US_PROF_NAME("embedding"));
    const int64_t N = m_shape.N();
    const int emb = m_layout.embedding_unit();
    const Tensor tokens = acts.tokens.view(DType::i32, 0, N);
    const Tensor dout = m_tp.row_output_backward(s.dres, s.dfull);  // (N,C)
    m_be.embedding_backward(embedding_params(params.grads(emb)).wte, dout, tokens, int(N), m_shape.C,
                            m_layout.vocab_begin(), m_layout.vocab_rows());
    params.grads_done(emb);
}

void GPT::backward(ChunkActivations& acts, Tensor dout, Tensor dinput, float grad_scale, ParamAccess& params,
                   BackwardPart part) {
    if (part == BackwardPart::weight) {
        weight_backward(acts, params);
        return;
    }
    US_ASSERT(part == BackwardPart::full || m_options.recompute != Recompute::full,
              "a split backward keeps block activations until W; full recomputation does not keep them");
    const bool split = part == BackwardPart::input;
    const int64_t R = m_shape.rows();
    const int C = m_shape.C;
    TrackedAllocator& alloc = m_be.allocator();

    BackwardScratch s =
        carve_backward_scratch(alloc.allocate(size_t(backward_temporaries_bytes(m_shape, has_head())),
                                              MemCategory::temporaries, "backward activation gradients"),
                               m_shape, has_head());

    const int first = m_begin, count = int(acts.blocks.size());
    if (split) acts.deferred.resize(size_t(count));
    auto block_input = [&](int i) { return i > 0 ? view_block(acts, i - 1).output : acts.input; };

    if (has_head()) {
        head_backward(acts, block_input(count), s, grad_scale, params);
    } else {
        US_ASSERT(dout.numel == R * C, "chunk output gradient has {} elements, expected {}", dout.numel, R * C);
        m_be.copy(s.dres, dout);
    }
    for (int i = count - 1; i >= 0; --i) {
        const int layer = first + i, unit = m_layout.block_unit(layer);
        const Tensor x = block_input(i);
        BlockActs a = view_block(acts, i);
        Allocation working;
        US_PROF_LAYER(layer);
        US_PROF_ZONE(prof::Lane::compute, prof::SpanKind::layer, prof::OpClass::none, m_block_names[size_t(layer)]);
        params.acquire(unit, Pass::backward);
        MoeActs& moe = acts.moe[size_t(i)];
        if (m_options.recompute == Recompute::full) {  // rebuild the block's intermediates from its input
            const bool moe_block = is_moe(layer);
            working = alloc.allocate(size_t(block_working_bytes(m_shape, Recompute::full, moe_block)),
                                     MemCategory::activations, "recompute working set");
            carve_block(a, working, m_shape, Recompute::full, BlockPart::working, moe_block);
            MoeStats again;  // the step's statistics were counted in the forward
            if (moe_block) again.routed.assign(size_t(m_config.moe_experts), 0);
            block_forward(layer, a, x, params, s.dfull, &moe, &again);  // dfull is free until the backward starts
        }
        if (split) {
            acts.deferred[size_t(i)] = alloc.allocate(size_t(deferred_block_bytes(m_shape)), MemCategory::temporaries,
                                                      "deferred weight-gradient inputs");
            const DeferredGrads keep = view_deferred(acts.deferred[size_t(i)], m_shape);
            block_backward(layer, a, x, s, params, &keep, &moe, grad_scale);
            params.release(unit, Pass::backward);
            continue;  // W computes the weight gradients and releases the block
        }
        block_backward(layer, a, x, s, params, nullptr, &moe, grad_scale);
        params.release(unit, Pass::backward);
        params.grads_done(unit);
        working.reset();
        moe = MoeActs{};  // the routed rows
        // This block's saved tensors (its output included: the next block is done) are no longer needed.
        if (i + 1 < count) acts.blocks[size_t(i + 1)].reset();
    }
    if (count > 0 && !split) acts.blocks[0].reset();

    if (has_embedding()) {
        embedding_backward(acts, s, params);
        if (!split) acts.embedding.reset();
    } else {
        US_ASSERT(dinput.numel == R * C, "chunk input gradient has {} elements, expected {}", dinput.numel, R * C);
        m_be.copy(dinput, s.dres);
    }
    if (split) return;  // the blocks (and the input they read) stay until W
    acts.tokens.reset();
    acts.blocks.clear();
    acts.moe.clear();
}

}  // namespace us
