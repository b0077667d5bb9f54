#include "engine/model/activations.h"

#include "common/core/check.h"

namespace us {

void carve_block(BlockActs& a, const Allocation& storage, const ActivationShape& s, Recompute mode, BlockPart part,
                 bool moe) {
    char* base = static_cast<char*>(storage.data());
    int64_t offset = 0;
    for (const auto& en : block_entries(s, mode, part, moe)) {
        const Tensor t = Tensor::of(base + offset, en.dtype, en.numel);
        offset += en.numel * int64_t(dtype_size(en.dtype));
        const std::string_view n = en.name;
        if (n == "ln1_mean")
            a.ln1_mean = t;
        else if (n == "ln1_rstd")
            a.ln1_rstd = t;
        else if (n == "ln2_mean")
            a.ln2_mean = t;
        else if (n == "ln2_rstd")
            a.ln2_rstd = t;
        else if (n == "ln1")
            a.ln1 = t;
        else if (n == "qkv")
            a.qkv = t;
        else if (n == "probs")
            a.probs = t;
        else if (n == "lse")
            a.lse = t;
        else if (n == "atty")
            a.atty = t;
        else if (n == "residual2")
            a.residual2 = t;
        else if (n == "ln2")
            a.ln2 = t;
        else if (n == "fch")
            a.fch = t;
        else if (n == "fch_gelu")
            a.fch_gelu = t;
        else if (n == "output")
            a.output = t;
        else if (n == "moe_probs")
            a.moe_probs = t;
        else if (n == "moe_topk")
            a.moe_topk = t;
        else if (n == "moe_gates")
            a.moe_gates = t;
        else if (n == "moe_rows")
            a.moe_rows = t;
    }
    US_ASSERT(size_t(offset) <= storage.bytes(), "block activations overflow their allocation");
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
    if (has_head && e == DType::bf16 && !fused_head_loss(s)) out.dlogits16 = take(DType::bf16, N * s.V);
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
