#include "common/core/activation_bytes.h"

namespace us {

std::vector<ActivationEntry> block_entries(const ActivationShape& s, Recompute mode, BlockPart part, bool moe) {
    // R: rows of the residual stream (N, or N/tp with sequence parallelism); the tensors between the column- and
    // the row-parallel linears have all N rows and the rank's share of the columns.
    const int64_t N = s.N(), R = s.rows(), C = s.C, Ca = s.Ca(), F = s.F();
    const DType e = s.dtype;
    const bool full = mode == Recompute::full;
    std::vector<ActivationEntry> v;
    if (full && part == BlockPart::saved) return {{"output", e, R * C}};
    if (!full && part == BlockPart::working) return {};
    v.push_back({"ln1_mean", DType::f32, R});
    v.push_back({"ln1_rstd", DType::f32, R});
    v.push_back({"ln2_mean", DType::f32, R});
    v.push_back({"ln2_rstd", DType::f32, R});
    v.push_back({"ln1", e, R * C});
    v.push_back({"qkv", e, 3 * N * Ca});
    // Selective recompute drops the attention core's saved tensor; full recompute keeps it in the working block
    // so that the recomputed forward does not have to be recomputed again inside attention backward.
    // Blockwise attention (ring attention under cp > 1, or --attention flash) keeps the log-sum-exp instead, in
    // every mode: its backward recomputes the scores.
    if (s.cp > 1 || s.flash)
        v.push_back({"lse", DType::f32, int64_t(s.B) * s.heads() * s.T});
    else if (mode != Recompute::selective)
        v.push_back({"probs", e, int64_t(s.B) * s.heads() * s.T * s.T});
    v.push_back({"atty", e, N * Ca});
    v.push_back({"residual2", e, R * C});
    v.push_back({"ln2", e, R * C});
    if (moe) {  // the router's; the expert rows are allocated by the MoE layer (moe.h)
        v.push_back({"moe_probs", DType::f32, N * s.E});
        v.push_back({"moe_topk", DType::i32, N * s.K});
        v.push_back({"moe_gates", DType::f32, N * s.K});
        v.push_back({"moe_rows", DType::i32, N * s.K});
    } else {
        v.push_back({"fch", e, N * F});
        v.push_back({"fch_gelu", e, N * F});
    }
    if (!full) v.push_back({"output", e, R * C});
    return v;
}

int64_t entries_bytes(const std::vector<ActivationEntry>& entries) {
    int64_t bytes = 0;
    for (const auto& en : entries) bytes += en.numel * int64_t(dtype_size(en.dtype));
    return bytes;
}

int64_t block_saved_bytes(const ActivationShape& s, Recompute mode, bool moe) {
    return entries_bytes(block_entries(s, mode, BlockPart::saved, moe));
}

int64_t block_working_bytes(const ActivationShape& s, Recompute mode, bool moe) {
    return entries_bytes(block_entries(s, mode, BlockPart::working, moe));
}

bool whole_attention_fused(const ActivationShape& s, bool cuda) {
    return cuda && s.flash && s.cp == 1 && s.dtype == DType::bf16 && s.C == 64 * s.NH && s.T % 64 == 0;
}

bool fused_head_loss(const ActivationShape& s) { return s.dtype == DType::bf16 && s.tp == 1; }

int64_t head_saved_bytes(const ActivationShape& s) {
    const int64_t N = s.N(), R = s.rows();
    const int64_t softmax_stats = s.tp > 1 ? 3 * N * 4 : 0;
    const int64_t logits = fused_head_loss(s) ? (N * s.V + 1) / 2 * 4 : N * s.V * 4;  // bf16: in whole floats
    return R * s.C * int64_t(dtype_size(s.dtype)) + 2 * R * 4 + logits + N * 4 + softmax_stats;
}

int64_t embedding_saved_bytes(const ActivationShape& s) { return s.rows() * s.C * int64_t(dtype_size(s.dtype)); }

int64_t backward_temporaries_bytes(const ActivationShape& s, bool has_head) {
    const int64_t N = s.N(), R = s.rows(), C = s.C, e = int64_t(dtype_size(s.dtype));
    // dres (R,C), dC (N,C), dqkv (N,3Ca), dfch (N,F); SP: dfull (N,C) and dln (R,C)
    int64_t bytes = (R * C + N * C + 3 * N * s.Ca() + N * s.F()) * e;
    if (s.sp) bytes += (N * C + R * C) * e;
    if (has_head && s.dtype == DType::bf16 && !fused_head_loss(s)) bytes += N * s.V * 2;
    return bytes;
}

int64_t forward_temporaries_bytes(const ActivationShape& s) {
    return s.sp ? s.N() * s.C * int64_t(dtype_size(s.dtype)) : 0;
}

int64_t deferred_block_bytes(const ActivationShape& s) {
    const int64_t N = s.N();
    return (2 * N * s.C + N * s.F() + 3 * N * s.Ca()) * int64_t(dtype_size(s.dtype));
}

}  // namespace us
