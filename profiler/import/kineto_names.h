// What Kineto's names say, as the mapping (docs/pytorch-traces.md) reads them: which CPU ops are collectives, the
// collective of a name ("nccl:all_reduce", "c10d::allgather_", "ncclDevKernel_ReduceScatter_..."), the size of a
// dtype, the kind of work an op does, its phase, and the parallelism a process group's description names.
#pragma once

#include <cstdint>
#include <string_view>

#include "profiler/event.h"

namespace us::prof {

// A CPU-side op that stands for a collective or a transfer (record_param_comms, c10d::*, gloo:*, nccl:*).
bool is_collective_op_name(std::string_view name);
// Waiting for an asynchronous collective to finish (_c10d_functional::wait_tensor): host time, not compute.
bool is_collective_wait_name(std::string_view name);
// An NCCL kernel on the GPU.
bool is_nccl_kernel_name(std::string_view name);
// The collective a name (an op, a kernel or the args' "Collective name") says; OpClass::none when none.
OpClass collective_of(std::string_view name);
// Bytes per element of a PyTorch dtype name ("Float", "BFloat16", "c10::Half", "float"); 0 when unknown.
int dtype_bytes(std::string_view dtype);
// The class of compute work a CPU op or kernel name suggests (gemm, attention, norm ...); none when unclear.
OpClass compute_class_of(std::string_view name);
// The phase an annotation starts (autograd's backward functions, the optimizer's step), or none.
Phase phase_of_annotation(std::string_view name);
// The parallelism a process group's description or name says ("mesh_tp", "TENSOR_MODEL_PARALLEL_GROUP" -> "tp"),
// empty when it says none; "world" for the default group.
std::string_view group_kind_of_description(std::string_view desc);

}  // namespace us::prof
