// OpenBLAS picks its kernels from the CPU's model number when the library loads. A release older than the CPU
// does not know the model and falls back to a generic kernel: Debian 12's 0.3.21 on a 5th-generation Xeon (family
// 6, model 207, AVX-512 BF16) chose Prescott, SSE3 code that measured 23.5 sgemm GFLOP/s on one core. The
// OPENBLAS_CORETYPE variable overrides the choice but is read only at load time, so a program that finds the
// fallback sets it and executes itself again, before it starts anything else.
#pragma once

#include <string>
#include <string_view>

namespace us::cpu {

// The instruction sets that decide which OpenBLAS kernel family a CPU can run.
struct CpuIsa {
    bool avx2 = false, avx512f = false, avx512_bf16 = false, amd = false;
    static CpuIsa of_this_cpu();
};

// The OPENBLAS_CORETYPE to ask for when `core` (what openblas_get_corename() said) is a generic or pre-AVX2 kernel
// below what `isa` runs; empty when the library's choice is already right.
std::string better_openblas_coretype(std::string_view core, const CpuIsa& isa);

// First thing in main: when OpenBLAS fell back to a kernel below the CPU and the user did not set
// OPENBLAS_CORETYPE, set it and re-execute this program with the same arguments (once; the process id stays, so
// mpirun and the GUI keep their child). Returns only when nothing needed doing or the re-execution failed.
void ensure_openblas_kernel(char** argv);

// Said in the device description: empty, or e.g. "OPENBLAS_CORETYPE=Cooperlake set by ultrascope: OpenBLAS had
// chosen Prescott for this CPU".
std::string openblas_kernel_note();

}  // namespace us::cpu
