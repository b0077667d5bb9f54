// `ultrascope export TRACE --kineto DIR`: one Kineto (torch.profiler) JSON file per rank, the form Holistic Trace
// Analysis, TensorBoard's profiler plugin and Perfetto read: distributedInfo, deviceProperties on GPU ranks,
// ProfilerStep#N annotations (N = step - 1), kernels / memcpys / memsets on (device, stream) with the
// correlation of a cuda_runtime launch event on the host thread, NCCL kernels named as NCCL names them, and the
// engine's ops as cpu_op events. What the trace does not record is said in each event's args (docs/pytorch-traces.md).
#pragma once

#include <string>
#include <vector>

#include "profiler/trace/trace_store.h"

namespace us::prof {

// NCCL's kernel name for a collective of this class ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(...)"); dtype is
// NCCL's ("f32", "bf16", "f16").
std::string nccl_kernel_name(OpClass op, const std::string& dtype);

// Writes DIR/rank-R.pt.trace.json (.json.gz when gz) for every rank; creates DIR. Returns the files written.
// UserError when DIR or a file cannot be written; files are written whole (through a temporary) or not at all.
std::vector<std::string> export_kineto_traces(const TraceStore& store, const std::string& dir, bool gz = true);

}  // namespace us::prof
