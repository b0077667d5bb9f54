// GPU kernel names as a reader wants them, and the kind of work a kernel does, from its name alone. Kernel names
// come from CUPTI (mangled or demangled) and from PyTorch's profiler (Kineto: the full demangled signature, return
// type and parameter list included), and they run to kilobytes: "void at::native::vectorized_elementwise_kernel<4,
// at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >,
// at::detail::Array<char*, 3> >(int, ...)" is a multiplication. The rule table of the kinds is documented in
// docs/pytorch-traces.md ("Kernel names and classes"); the op table (profiler/analysis/op_table.h), the Kineto
// reader and CUPTI's recorder share it. Hostile names (unbalanced brackets, garbage) never throw.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace us {

// The fine class of a kernel. Finer than the profiler's OpClass (which classes the engine's ops): a kernel is
// work of one kind whatever op launched it.
enum class KernelKind : uint8_t {
    other = 0,
    gemm,           // matrix products: cuBLAS, cuBLASLt, CUTLASS, nvjet, GEMV, their split-K reductions
    conv,           // convolutions: cuDNN's implicit GEMMs (fprop/dgrad/wgrad), winograd, im2col
    attention,      // fused attention (flash, fmha, SDPA), softmax, rotary embeddings
    norm,           // layer/RMS/batch/group norms, their backward kernels
    elementwise,    // pointwise work: PyTorch's elementwise kernels, activations, copies, fills, layout transforms
    reduction,      // reductions: sums, means, max, norms of a vector, losses (cross-entropy), pooling
    embedding,      // lookups into a table: embedding (bag), index_select, their backward
    optimizer,      // parameter updates: Adam(W), SGD, Adagrad, PyTorch's multi_tensor_apply/foreach kernels
    memory,         // the copy engines' work: memcpy, memset, DMA (not kernels on the SMs)
    communication,  // NCCL/RCCL/NVSHMEM kernels, in-kernel all-reduces
};
inline constexpr int kKernelKindCount = int(KernelKind::communication) + 1;
inline constexpr std::string_view kKernelKindNames[kKernelKindCount] = {
    "other",     "gemm",      "conv",      "attention", "norm",         "elementwise",
    "reduction", "embedding", "optimizer", "memory",    "communication"};

// What a reader reads in a table of kernels: the function's name without its namespaces, return type and
// parameter list, with a summary of the template arguments that say what it computes (functors, ops, the
// function a lambda comes from) and none of those that only say types or sizes:
//   "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float,
//    at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3> >(int, ...)"
//       -> "vectorized_elementwise_kernel<MulFunctor>"
//   "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>(...::Params)"
//       -> "cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4" (a generic name, "Kernel", "device_kernel" ...,
//          is named by its class argument, else keeps its namespace: "gemvx::kernel")
//   "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
//       -> "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
// Mangled names ("_Z...") are demangled first; plain names ("ampere_sgemm_128x64_tn", "Memset (Device)") come back
// as they are. No width: cutting the result to fit is the caller's.
std::string short_kernel_name(std::string_view full);

// A kernel name's pieces: `name` the function's ("vectorized_elementwise_kernel"; a generic one's class argument
// or "namespace::name"; a plain name whole), `summary` its informative template arguments ("MulFunctor", "" when
// none), `scope` its namespaces ("at::native"). short_kernel_name() is name<summary>.
struct KernelNameParts {
    std::string name;
    std::string summary;
    std::string scope;
};
KernelNameParts kernel_name_parts(std::string_view full);

// The kernel's kind by the ordered token rules of the table (kernel_names.cpp), read on the function's name, then
// on its template summary, then on its namespaces; `other` when no rule matches (the launching op may say more).
KernelKind kernel_kind(std::string_view full);

// A mangled C++ name ("_Z...") demangled; any other name, or one that does not demangle, as it is.
std::string demangle_name(std::string_view name);

}  // namespace us
