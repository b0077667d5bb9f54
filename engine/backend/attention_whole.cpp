// Backend's default whole-sequence blockwise attention (backend.h): the blockwise ops composed with fp32 running
// state (forward) and fp32 gradients (backward), as one step of ring attention does with nothing travelling. The
// allocations are named as the memory view shows them.
#include "engine/backend/backend.h"

namespace us {

void Backend::attention_whole_forward(const AttentionBlockArgs& a, Tensor out, Tensor lse) {
    const int64_t rows = int64_t(a.B) * a.NH * a.T, values = int64_t(a.B) * a.T * a.NH * a.HD;
    // The online softmax's running state: an output accumulator, and per row its maximum and sum (a zero sum
    // means nothing merged yet).
    Allocation state = allocator().allocate(size_t(values + 2 * rows) * 4, MemCategory::temporaries,
                                            "blockwise attention softmax state");
    const Tensor acc = state.view(DType::f32, 0, values);
    const Tensor row_max = state.view(DType::f32, values, rows);
    const Tensor row_sum = state.view(DType::f32, values + rows, rows);
    fill_zero(state.view(DType::f32, 0, values + 2 * rows));
    attention_block_forward(a, acc, row_max, row_sum);
    attention_block_finish(out, lse, acc, row_max, row_sum, a.B, a.T, a.NH, a.HD);
}

void Backend::attention_whole_backward(const AttentionBlockArgs& a, Tensor dqkv, Tensor dout, Tensor out, Tensor lse) {
    const int64_t rows = int64_t(a.B) * a.NH * a.T, values = int64_t(a.B) * a.T * a.NH * a.HD;
    const Allocation work = allocator().allocate(size_t(3 * values + rows) * 4, MemCategory::temporaries,
                                                 "blockwise attention backward (k, v and q gradients, deltas)");
    const Tensor dkv = work.view(DType::f32, 0, 2 * values);
    const Tensor dq = work.view(DType::f32, 2 * values, values);
    const Tensor delta = work.view(DType::f32, 3 * values, rows);
    fill_zero(dq);
    fill_zero(dkv);
    attention_block_delta(delta, dout, out, a.B, a.T, a.NH, a.HD);
    attention_block_backward(a, dq, dkv, dout, lse, delta);
    attention_block_store_grads(dqkv, dq, dkv, a.B, a.T, a.NH * a.HD);
}

}  // namespace us
