// The second half of a split backward (zero-bubble pipelines, BackwardPart::weight): B computed the input
// gradients and kept each block's weight-GEMM output gradients (DeferredGrads); W, scheduled later to fill the
// pipeline's bubbles, computes the weight gradients from them and releases the chunk's activations.
#include "engine/model/gpt.h"
#include "engine/model/gpt_linears.h"
#include "profiler/record/zones.h"

namespace us {

void GPT::block_weight_grads(int layer, const BlockActs& a, const DeferredGrads& k, ParamAccess& params, Tensor whole) {
    const int C = m_shape.C, Ca = int(m_shape.Ca()), F = int(m_shape.F());
    const BlockParams d = block_params(params.grads(m_layout.block_unit(layer)), C, m_shape.tp);
    matmul_backward_weight(kFcProj, d.fcproj_w, k.dout_fcproj, a.fch_gelu, F, C);
    matmul_backward_weight(kFc, d.fc_w, k.dfch, m_tp.column_input_forward(a.ln2, whole), C, F);
    matmul_backward_weight(kAttnProj, d.attproj_w, k.dres2, a.atty, Ca, C);
    matmul_backward_weight(kQkv, d.qkv_w, k.dqkv, m_tp.column_input_forward(a.ln1, whole), C, 3 * Ca);
}

// W of a split backward: the weight GEMMs of every block from what B kept, then everything is released.
void GPT::weight_backward(ChunkActivations& acts, ParamAccess& params) {
    Allocation whole_storage;
    Tensor whole;
    if (m_tp.sp()) {  // the LayerNorm outputs are gathered again for the weight GEMMs
        whole_storage = m_be.allocator().allocate(size_t(forward_temporaries_bytes(m_shape)), MemCategory::temporaries,
                                                  "sequence-parallel gathered rows");
        whole = whole_storage.view(m_shape.dtype, 0, m_shape.N() * m_shape.C);
    }
    for (int i = int(acts.blocks.size()) - 1; i >= 0; --i) {
        const int layer = m_begin + i;
        US_PROF_LAYER(layer);
        US_PROF_ZONE(prof::Lane::compute, prof::SpanKind::layer, prof::OpClass::none, m_block_names[size_t(layer)]);
        block_weight_grads(layer, view_block(acts, i), view_deferred(acts.deferred[size_t(i)], m_shape), params, whole);
        params.grads_done(m_layout.block_unit(layer));
        acts.deferred[size_t(i)].reset();
        acts.blocks[size_t(i)].reset();
    }
    acts.blocks.clear();
    acts.deferred.clear();
    acts.embedding.reset();
    acts.tokens.reset();
}

}  // namespace us
