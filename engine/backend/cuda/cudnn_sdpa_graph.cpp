// The two graphs of cuDNN's fused attention (cudnn_sdpa_graph.h), tensor by tensor and operation by operation.
#include "engine/backend/cuda/cudnn_sdpa_graph.h"

#if ULTRASCOPE_HAVE_CUDNN_HEADERS
#include "engine/backend/cuda/cudnn_sdpa_layout.h"

namespace us::cuda {

namespace {

const cudnnDataType_t F32 = CUDNN_DATA_FLOAT, BF16 = CUDNN_DATA_BFLOAT16;

Dims4 scores(const SdpaShape& s) { return {s.B, s.NH, s.T, s.T}; }
Dims4 per_row(const SdpaShape& s) { return {s.B, s.NH, s.T, 1}; }
// A score matrix read transposed ([B, NH, keys, queries]) without moving it: the reshape cuDNN fuses.
Dims4 transposed_strides(const SdpaShape& s) { return {int64_t(s.NH) * s.T * s.T, int64_t(s.T) * s.T, 1, s.T}; }

cudnnBackendDescriptor_t tensor(CudnnGraph& g, int64_t uid, const SdpaTensorLayout& l, cudnnDataType_t t) {
    return g.tensor(uid, t, l.dims, l.strides);
}

// s = mask(QKᵀ · scale) with the causal mask (a key after its query gets the mask value), in fp32.
cudnnBackendDescriptor_t masked_scores(CudnnGraph& g, const SdpaShape& s, cudnnBackendDescriptor_t q,
                                       cudnnBackendDescriptor_t k_t, cudnnBackendDescriptor_t scale,
                                       cudnnBackendDescriptor_t mask_value, cudnnBackendDescriptor_t stats) {
    cudnnBackendDescriptor_t qk = g.virtual_tensor(F32, scores(s)), scaled = g.virtual_tensor(F32, scores(s));
    g.matmul(q, k_t, qk);
    g.pointwise(CUDNN_POINTWISE_MUL, qk, scale, nullptr, scaled);
    if (stats) {  // backward: s - lse before the mask, so that exp() of it is P
        cudnnBackendDescriptor_t shifted = g.virtual_tensor(F32, scores(s));
        g.pointwise(CUDNN_POINTWISE_SUB, scaled, stats, nullptr, shifted);
        scaled = shifted;
    }
    cudnnBackendDescriptor_t row = g.virtual_tensor(CUDNN_DATA_INT32, scores(s));
    cudnnBackendDescriptor_t col = g.virtual_tensor(CUDNN_DATA_INT32, scores(s));
    cudnnBackendDescriptor_t keep = g.virtual_tensor(CUDNN_DATA_BOOLEAN, scores(s));
    cudnnBackendDescriptor_t masked = g.virtual_tensor(F32, scores(s));
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, scaled, nullptr, nullptr, row, 2);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, scaled, nullptr, nullptr, col, 3);
    g.pointwise(CUDNN_POINTWISE_CMP_GE, row, col, nullptr, keep);
    g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, scaled, mask_value, keep, masked);  // keep ? scores : mask value
    return masked;
}

}  // namespace

void sdpa_forward_graph(CudnnGraph& g, const SdpaShape& s) {
    const SdpaLayout l = sdpa_layout(s.B, s.T, s.NH, s.HD);
    cudnnBackendDescriptor_t q = tensor(g, kQ, l.q, BF16), k_t = tensor(g, kK, l.k_t, BF16);
    cudnnBackendDescriptor_t v = tensor(g, kV, l.v, BF16), o = tensor(g, kO, l.o, BF16);
    cudnnBackendDescriptor_t stats = tensor(g, kStats, l.stats, F32);
    cudnnBackendDescriptor_t scale = g.scalar(kScale), mask_value = g.scalar(kMaskValue);
    cudnnBackendDescriptor_t x = masked_scores(g, s, q, k_t, scale, mask_value, nullptr);
    // The softmax with its statistics: lse = max + log(sum(exp(x - max))), natural log, as our kernels keep it.
    cudnnBackendDescriptor_t max = g.virtual_tensor(F32, per_row(s)), sum = g.virtual_tensor(F32, per_row(s));
    cudnnBackendDescriptor_t centred = g.virtual_tensor(F32, scores(s)), e = g.virtual_tensor(F32, scores(s));
    cudnnBackendDescriptor_t log_sum = g.virtual_tensor(F32, per_row(s));
    cudnnBackendDescriptor_t p = g.virtual_tensor(BF16, scores(s));  // the second matmul's operand in the io type
    g.reduction(CUDNN_REDUCE_TENSOR_MAX, x, max);
    g.pointwise(CUDNN_POINTWISE_SUB, x, max, nullptr, centred);
    g.pointwise(CUDNN_POINTWISE_EXP, centred, nullptr, nullptr, e);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, sum);
    g.pointwise(CUDNN_POINTWISE_LOG, sum, nullptr, nullptr, log_sum);
    g.pointwise(CUDNN_POINTWISE_ADD, max, log_sum, nullptr, stats);
    g.pointwise(CUDNN_POINTWISE_DIV, e, sum, nullptr, p);
    g.matmul(p, v, o);
}

void sdpa_backward_graph(CudnnGraph& g, const SdpaShape& s, bool deterministic) {
    const SdpaLayout l = sdpa_layout(s.B, s.T, s.NH, s.HD);
    const Dims4 bhsd{s.B, s.NH, s.T, s.HD};
    cudnnBackendDescriptor_t q = tensor(g, kQ, l.q, BF16), k_t = tensor(g, kK, l.k_t, BF16);
    cudnnBackendDescriptor_t v_t = tensor(g, kV, l.v_t, BF16), o = tensor(g, kO, l.o, BF16);
    cudnnBackendDescriptor_t d_o = tensor(g, kDO, l.o, BF16), stats = tensor(g, kStats, l.stats, F32);
    cudnnBackendDescriptor_t dq = tensor(g, kDQ, l.q, BF16), dk = tensor(g, kDK, l.k, BF16);
    cudnnBackendDescriptor_t dv = tensor(g, kDV, l.v, BF16);
    cudnnBackendDescriptor_t scale = g.scalar(kScale), mask_value = g.scalar(kMaskValue), one = g.scalar(kOne);
    // rowsum(dO ∘ O) per query row, kept in memory (our workspace): the softmax backward's correction term.
    cudnnBackendDescriptor_t d_o_o = g.virtual_tensor(F32, bhsd), dot = g.virtual_tensor(F32, per_row(s));
    cudnnBackendDescriptor_t row_dot = g.tensor(kRowDot, F32, per_row(s), l.stats.strides);
    g.pointwise(CUDNN_POINTWISE_MUL, d_o, o, nullptr, d_o_o);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, d_o_o, dot);
    g.pointwise(CUDNN_POINTWISE_MUL, dot, one, nullptr, row_dot);
    // P recomputed from the stats; dV = Pᵀ dO.
    cudnnBackendDescriptor_t x = masked_scores(g, s, q, k_t, scale, mask_value, stats);
    cudnnBackendDescriptor_t p = g.virtual_tensor(F32, scores(s));
    cudnnBackendDescriptor_t p_t = g.virtual_tensor(BF16, {s.B, s.NH, s.T, s.T}, transposed_strides(s));
    g.pointwise(CUDNN_POINTWISE_EXP, x, nullptr, nullptr, p);
    g.reshape(p, p_t);
    g.matmul(p_t, d_o, dv);
    // dS = P (dO Vᵀ - rowsum) · scale; dK = dSᵀ Q.
    cudnnBackendDescriptor_t dp = g.virtual_tensor(F32, scores(s)), centred = g.virtual_tensor(F32, scores(s));
    cudnnBackendDescriptor_t ds_unscaled = g.virtual_tensor(F32, scores(s)), ds = g.virtual_tensor(F32, scores(s));
    cudnnBackendDescriptor_t ds_t = g.virtual_tensor(BF16, {s.B, s.NH, s.T, s.T}, transposed_strides(s));
    g.matmul(d_o, v_t, dp);
    g.pointwise(CUDNN_POINTWISE_SUB, dp, row_dot, nullptr, centred);
    g.pointwise(CUDNN_POINTWISE_MUL, centred, p, nullptr, ds_unscaled);
    g.pointwise(CUDNN_POINTWISE_MUL, ds_unscaled, scale, nullptr, ds);
    g.reshape(ds, ds_t);
    g.matmul(ds_t, q, dk);
    // dQ = dS K, K read back from Kᵀ by a reshape. Deterministic: straight into dq (cuDNN then keeps dP in its
    // workspace); otherwise through an fp32 accumulator that the engine may add to with atomics.
    cudnnBackendDescriptor_t k = g.virtual_tensor(BF16, bhsd, l.k.strides);
    g.reshape(k_t, k);
    if (deterministic) {
        g.matmul(ds, k, dq);
    } else {
        cudnnBackendDescriptor_t accum =
            g.tensor(kDQAccum, F32, bhsd, {int64_t(s.NH) * s.T * s.HD, int64_t(s.T) * s.HD, s.HD, 1});
        g.matmul(ds, k, accum);
        g.pointwise(CUDNN_POINTWISE_IDENTITY, accum, nullptr, nullptr, dq);
    }
}

}  // namespace us::cuda
#endif
