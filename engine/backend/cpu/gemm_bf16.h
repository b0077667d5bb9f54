// bf16 GEMM on the CPU. Debian's OpenBLAS has no sbgemm, so the engine carries its own kernel for CPUs with
// AVX-512 BF16 (vdpbf16ps: two bf16 products accumulated into fp32 per lane), chosen at run time, and a
// fallback that widens the operands to fp32 and calls sgemm. Both accumulate in fp32; C is fp32 or bf16.
#pragma once

#include <cstddef>
#include <string_view>

#include "engine/backend/backend.h"

namespace us::cpu {

enum class Bf16GemmKernel { automatic, avx512_bf16, fp32_sgemm };

bool cpu_supports_avx512_bf16();
const char* bf16_gemm_kernel_name(Bf16GemmKernel kernel);

// The kernel `automatic` resolves to: avx512_bf16 on a CPU with AVX-512 BF16 whose OpenBLAS runs a 256-bit sgemm
// (Haswell, Zen: a Zen 4 measured the kernel 3.2-3.9x it), else fp32_sgemm (OpenBLAS's AVX-512 sgemm on the rounded
// inputs measured faster than the kernel on a Xeon). US_BF16_GEMM=avx512 or =sgemm in the environment overrides it.
Bf16GemmKernel resolve_bf16_gemm_kernel(Bf16GemmKernel requested);
// The rule itself, for a CPU and an OpenBLAS core name (openblas_get_corename()); tested alone.
Bf16GemmKernel automatic_bf16_gemm_kernel(bool cpu_has_avx512_bf16, std::string_view openblas_core);

// Floats of scratch that gemm_bf16 needs for this call with this kernel. The avx512 kernel sizes it for
// omp_get_max_threads() threads (one inside a parallel region): ask from the same context as the call.
size_t gemm_bf16_scratch_floats(const GemmArgs& args, Bf16GemmKernel kernel);

// args.a and args.b are bf16; args.c is fp32 or bf16. `scratch` holds gemm_bf16_scratch_floats(args, kernel).
// Threads with OpenMP over tiles of C, single-threaded inside a parallel region. The avx512 kernel's results
// do not depend on the thread count; like the hardware, it treats bf16 denormals (< 1.2e-38) as zero.
void gemm_bf16(const GemmArgs& args, float* scratch, Bf16GemmKernel kernel);

}  // namespace us::cpu
