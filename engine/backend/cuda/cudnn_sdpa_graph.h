// The operation graphs of cuDNN's fused flash attention, forward and backward, written with cudnn_graph.h: the
// composite graph of matmuls, pointwise operations and reductions that cuDNN's fused-attention engines take (the
// one cudnn-frontend builds for its SDPA node), causal, scale 1/sqrt(HD), no dropout. The tensors with memory are
// named by SdpaUid in the variant pack (cudnn_attention.cpp); their layout is cudnn_sdpa_layout.h's.
#pragma once

#if ULTRASCOPE_HAVE_CUDNN_HEADERS
#include <cstdint>

#include "engine/backend/cuda/cudnn_graph.h"

namespace us::cuda {

struct SdpaShape;

// The variant pack's names for the tensors that have memory (device) or a value (host, by value).
enum SdpaUid : int64_t {
    kQ = 1,
    kK,          // as Kᵀ [B, NH, HD, T]
    kV,          // forward: V [B, NH, T, HD]; backward: Vᵀ
    kO,          // out
    kStats,      // lse (B, NH, T) fp32
    kScale,      // 1/sqrt(HD), by value
    kMaskValue,  // what a masked score becomes (-inf; float's lowest before cuDNN 9.10), by value
    kDO,
    kDQ,
    kDK,
    kDV,
    kRowDot,   // rowsum(dO ∘ O), fp32 (B, NH, T): our workspace
    kDQAccum,  // the nondeterministic backward's fp32 dq accumulator: our workspace
    kOne,      // 1.0, by value
};

// out and the log-sum-exp ("stats": max + log(sum(exp(x - max))), natural log) from q, kᵀ and v.
void sdpa_forward_graph(CudnnGraph& g, const SdpaShape& s);
// dq, dk, dv from q, kᵀ, vᵀ, out, dout and the stats. Deterministic: dq straight from the dS·K matmul (no fp32
// accumulator, which cuDNN may add to with atomics).
void sdpa_backward_graph(CudnnGraph& g, const SdpaShape& s, bool deterministic);

}  // namespace us::cuda
#endif
