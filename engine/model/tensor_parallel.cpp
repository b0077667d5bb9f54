#include "engine/model/tensor_parallel.h"

#include "engine/comm/flight_frames.h"

#include "profiler/record/zones.h"

namespace us {

TensorParallel::TensorParallel(Communicator& tp_group, bool sequence_parallel, Backend& backend)
    : m_group(&tp_group), m_sp(sequence_parallel), m_be(&backend) {}

const EvenSplit& TensorParallel::split(int64_t whole) {
    US_ASSERT(whole % size() == 0, "{} elements do not split over tp {}", whole, size());
    return m_splits.get(whole, size());
}

// ---- the mappings

void TensorParallel::copy_to_tp_region_backward(Tensor dx) {
    US_FLIGHT_FRAME("TensorParallel::copy_to_tp_region (backward)", FrameDetail::none);
    if (!active()) return;
    US_PROF_OP_NAME(US_PROF_NAME("copy_to_tp_region (backward: all-reduce)"));
    m_group->all_reduce(dx);
}

void TensorParallel::reduce_from_tp_region_forward(Tensor x) {
    US_FLIGHT_FRAME("TensorParallel::reduce_from_tp_region", FrameDetail::none);
    if (!active()) return;
    US_PROF_OP_NAME(US_PROF_NAME("reduce_from_tp_region (all-reduce)"));
    m_group->all_reduce(x);
}

void TensorParallel::gather_from_sp_region_forward(Tensor whole, Tensor rows) {
    US_FLIGHT_FRAME("TensorParallel::gather_from_sp_region", FrameDetail::none);
    US_ASSERT(rows.numel * size() == whole.numel, "all-gather of {} into {}", rows.numel, whole.numel);
    US_PROF_OP_NAME(US_PROF_NAME("gather_from_sp_region (all-gather)"));
    const EvenSplit& pieces = split(whole.numel);
    m_be->copy(whole.slice(pieces.displs[size_t(rank())], rows.numel), rows);
    m_group->all_gather(whole, pieces.counts, pieces.displs);
}

void TensorParallel::gather_from_sp_region_backward(Tensor drows, Tensor dwhole) {
    US_FLIGHT_FRAME("TensorParallel::gather_from_sp_region (backward)", FrameDetail::none);
    US_ASSERT(drows.numel * size() == dwhole.numel, "reduce-scatter of {} into {}", dwhole.numel, drows.numel);
    US_PROF_OP_NAME(US_PROF_NAME("gather_from_sp_region (backward: reduce-scatter)"));
    const EvenSplit& pieces = split(dwhole.numel);
    m_group->reduce_scatter(dwhole, drows, pieces.counts, pieces.displs);
}

void TensorParallel::reduce_scatter_to_sp_region_forward(Tensor rows, Tensor whole) {
    US_FLIGHT_FRAME("TensorParallel::reduce_scatter_to_sp_region", FrameDetail::none);
    US_ASSERT(rows.numel * size() == whole.numel, "reduce-scatter of {} into {}", whole.numel, rows.numel);
    US_PROF_OP_NAME(US_PROF_NAME("reduce_scatter_to_sp_region (reduce-scatter)"));
    const EvenSplit& pieces = split(whole.numel);
    m_group->reduce_scatter(whole, rows, pieces.counts, pieces.displs);
}

void TensorParallel::reduce_scatter_to_sp_region_backward(Tensor dwhole, Tensor drows) {
    US_FLIGHT_FRAME("TensorParallel::reduce_scatter_to_sp_region (backward)", FrameDetail::none);
    US_ASSERT(drows.numel * size() == dwhole.numel, "all-gather of {} into {}", drows.numel, dwhole.numel);
    US_PROF_OP_NAME(US_PROF_NAME("reduce_scatter_to_sp_region (backward: all-gather)"));
    const EvenSplit& pieces = split(dwhole.numel);
    m_be->copy(dwhole.slice(pieces.displs[size_t(rank())], drows.numel), drows);
    m_group->all_gather(dwhole, pieces.counts, pieces.displs);
}

// ---- what the model calls

Tensor TensorParallel::column_input_forward(Tensor rows, Tensor whole) {
    if (!sp()) return rows;  // copy_to_tp_region: the identity forward
    gather_from_sp_region_forward(whole, rows);
    return whole;
}

Tensor TensorParallel::column_input_backward(Tensor dwhole, Tensor drows) {
    if (!sp()) {
        copy_to_tp_region_backward(dwhole);
        return dwhole;
    }
    gather_from_sp_region_backward(drows, dwhole);
    return drows;
}

void TensorParallel::row_output_forward(Tensor partial, Tensor rows) {
    if (!sp()) {
        US_ASSERT(partial.data == rows.data, "reduce_from_tp_region reduces in place");
        reduce_from_tp_region_forward(partial);
        return;
    }
    reduce_scatter_to_sp_region_forward(rows, partial);
}

Tensor TensorParallel::row_output_backward(Tensor drows, Tensor dwhole) {
    if (!sp()) return drows;  // reduce_from_tp_region: the identity backward
    reduce_scatter_to_sp_region_backward(dwhole, drows);
    return dwhole;
}

void TensorParallel::all_reduce_max(Tensor t) {
    US_FLIGHT_FRAME("TensorParallel::all_reduce_max (vocab-parallel softmax)", FrameDetail::none);
    if (!active()) return;
    US_PROF_OP_NAME(US_PROF_NAME("vocab-parallel softmax: max"));
    m_group->all_reduce(t, ReduceOp::max);
}

void TensorParallel::all_reduce_sum(Tensor t) {
    US_FLIGHT_FRAME("TensorParallel::all_reduce_sum (vocab-parallel softmax)", FrameDetail::none);
    if (!active()) return;
    US_PROF_OP_NAME(US_PROF_NAME("vocab-parallel softmax: sum and target logit"));
    m_group->all_reduce(t);
}

}  // namespace us
