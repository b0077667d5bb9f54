// Kernel names as CUPTI reports them (mangled C++ or plain C), classified and made readable. NCCL kernels are
// communication and name their collective ("ncclDevKernel_AllReduce_Sum_f32_RING_LL"); GEMM kernels (cuBLAS,
// CUTLASS, nvjet: the rule table of common/core/kernel_names.h) are GEMMs; every other kernel takes the class of the
// op that launched it.
#pragma once

#include <string>
#include <string_view>

#include "profiler/event.h"

namespace us::prof {

struct KernelClass {
    bool nccl = false;           // a NCCL kernel: communication, drawn on the device_comm lane
    OpClass op = OpClass::none;  // gemm, the NCCL collective, or none (the launching op decides)
};

// NCCL runs sends and receives in one kernel ("SendRecv"): it is classified `send`, and the launching op, when it
// says `recv`, makes it a receive.
// Pass the readable name: a parameter type (say `GemmArgs`) must not make a kernel a GEMM.
KernelClass classify_kernel(std::string_view name);

// The name to show: demangled, without the return type and the parameter list
// ("_Z11gelu_kernelIfEvPT_PKS0_i", i.e. "void gelu_kernel<float>(float*, float const*, int)",
// -> "gelu_kernel<float>").
std::string readable_kernel_name(std::string_view name);

}  // namespace us::prof
