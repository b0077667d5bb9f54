#include "engine/parallel/sp_replicated_grads.h"

#include "profiler/record/zones.h"

namespace us {

void all_reduce_sp_replicated_grads(TensorParallel& tp, TrainState& state, const ParamLayout& layout,
                                    Backend& backend) {
    if (!tp.sp()) return;
    std::vector<Tensor> pieces;
    int64_t total = 0;
    for (const ParamTensor& t : layout.tensors()) {
        if (t.split != TpSplit::replicated || t.grad_from_all_rows) continue;
        for (const Tensor& piece : state.grad_pieces(t)) {
            pieces.push_back(piece);
            total += piece.numel;
        }
    }
    if (total == 0) return;
    const DType dtype = pieces.front().dtype;
    Allocation packed = backend.allocator().allocate(size_t(total) * dtype_size(dtype), MemCategory::comm_buffers,
                                                     "sequence-parallel replicated gradients");
    const Tensor all = packed.view(dtype, 0, total);
    int64_t at = 0;
    for (const Tensor& p : pieces) {
        backend.copy(all.slice(at, p.numel), p);
        at += p.numel;
    }
    {
        US_PROF_OP_NAME(US_PROF_NAME("sequence-parallel replicated grads (all-reduce)"));
        tp.group()->all_reduce(all);
    }
    at = 0;
    for (const Tensor& p : pieces) {
        backend.copy(p, all.slice(at, p.numel));
        at += p.numel;
    }
}

}  // namespace us
