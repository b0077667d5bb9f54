#include "engine/model/activations.h"

#include "common/core/check.h"

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
    if (s.cp > 1 || s.flash) v.push_back({"lse", DType::f32, int64_t(s.B) * s.heads() * s.T});
    else if (mode != Recompute::selective) v.push_back({"probs", e, int64_t(s.B) * s.heads() * s.T * s.T});
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

void carve_block(BlockActs& a, const Allocation& storage, const ActivationShape& s, Recompute mode, BlockPart part,
                 bool moe) {
    char* base = static_cast<char*>(storage.data());
    int64_t offset = 0;
    for (const auto& en : block_entries(s, mode, part, moe)) {
        const Tensor t = Tensor::of(base + offset, en.dtype, en.numel);
        offset += en.numel * int64_t(dtype_size(en.dtype));
        const std::string_view n = en.name;
        if (n == "ln1_mean") a.ln1_mean = t;
        else if (n == "ln1_rstd") a.ln1_rstd = t;
        else if (n == "ln2_mean") a.ln2_mean = t;
        else if (n == "ln2_rstd") a.ln2_rstd = t;
        else if (n == "ln1") a.ln1 = t;
        else if (n == "qkv") a.qkv = t;
        else if (n == "probs") a.probs = t;
        else if (n == "lse") a.lse = t;
        else if (n == "atty") a.atty = t;
        else if (n == "residual2") a.residual2 = t;
        else if (n == "ln2") a.ln2 = t;
        else if (n == "fch") a.fch = t;
        else if (n == "fch_gelu") a.fch_gelu = t;
        else if (n == "output") a.output = t;
        else if (n == "moe_probs") a.moe_probs = t;
        else if (n == "moe_topk") a.moe_topk = t;
        else if (n == "moe_gates") a.moe_gates = t;
        else if (n == "moe_rows") a.moe_rows = t;
    }
    US_ASSERT(size_t(offset) <= storage.bytes(), "block activations overflow their allocation");
}

int64_t head_saved_bytes(const ActivationShape& s) {
    const int64_t N = s.N(), R = s.rows();
    const int64_t softmax_stats = s.tp > 1 ? 3 * N * 4 : 0;
    return R * s.C * int64_t(dtype_size(s.dtype)) + 2 * R * 4 + N * s.V * 4 + N * 4 + softmax_stats;
}

int64_t embedding_saved_bytes(const ActivationShape& s) { return s.rows() * s.C * int64_t(dtype_size(s.dtype)); }

int64_t backward_temporaries_bytes(const ActivationShape& s, bool has_head) {
    const int64_t N = s.N(), R = s.rows(), C = s.C, e = int64_t(dtype_size(s.dtype));
    // dres (R,C), dC (N,C), dqkv (N,3Ca), dfch (N,F); SP: dfull (N,C) and dln (R,C)
    int64_t bytes = (R * C + N * C + 3 * N * s.Ca() + N * s.F()) * e;
    if (s.sp) bytes += (N * C + R * C) * e;
    if (has_head && s.dtype == DType::bf16) bytes += N * s.V * 2;
    return bytes;
}

int64_t forward_temporaries_bytes(const ActivationShape& s) {
    return s.sp ? s.N() * s.C * int64_t(dtype_size(s.dtype)) : 0;
}

int64_t deferred_block_bytes(const ActivationShape& s) {
    const int64_t N = s.N();
    return (2 * N * s.C + N * s.F() + 3 * N * s.Ca()) * int64_t(dtype_size(s.dtype));
}

BackwardScratch carve_backward_scratch(Allocation storage, const ActivationShape& s, bool has_head) {
    BackwardScratch out;
    out.storage = std::move(storage);
    const int64_t N = s.N(), R = s.rows();
    const DType e = s.dtype;
    int64_t off = 0;
    auto take = [&](DType t, int64_t n) {
        const Tensor v = Tensor::of(static_cast<char*>(out.storage.data()) + off, t, n);
        off += n * int64_t(dtype_size(t));
        return v;
    };
    out.dres = take(e, R * s.C);
    out.dC = take(e, N * s.C);
    out.dqkv = take(e, 3 * N * s.Ca());
    out.dfch = take(e, N * s.F());
    if (s.sp) {
        out.dfull = take(e, N * s.C);
        out.dln = take(e, R * s.C);
    }
    if (has_head && e == DType::bf16) out.dlogits16 = take(DType::bf16, N * s.V);
    US_ASSERT(off <= int64_t(out.storage.bytes()), "backward scratch needs {} bytes, has {}", off, out.storage.bytes());
    return out;
}

DeferredGrads view_deferred(const Allocation& storage, const ActivationShape& s) {
    const int64_t N = s.N(), NC = N * s.C, NF = N * s.F(), NA = N * s.Ca();
    const DType e = s.dtype;
    return {storage.view(e, 0, NC), storage.view(e, NC, NF), storage.view(e, NC + NF, NC),
            storage.view(e, 2 * NC + NF, 3 * NA)};
}

}  // namespace us
