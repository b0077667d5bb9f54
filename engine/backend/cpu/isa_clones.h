// One binary, fast on every x86-64: a portable build (-DULTRASCOPE_NATIVE=OFF, the baseline instruction set) compiles
// the compute-bound loops of the CPU kernels (GeLU's tanh, the softmax and cross-entropy exps) three times, for
// x86-64-v4 (AVX-512), x86-64-v3 (AVX2 + FMA) and the baseline, and the loader picks the best one the CPU has
// (GCC's target_clones, an ifunc resolved once). Measured: GeLU forward and backward 2.7x slower at the baseline
// than with AVX2 (docs/performance.md). A native build (the default) is compiled for its CPU and has no clones
// (US_NO_ISA_CLONES): its baseline would not be a subset of the clones', and GCC does not inline across that.
// The clones differ in vector width and, where the CPU has FMA, in contraction (CMakeLists.txt); the reductions'
// lane order is fixed (lane_reductions.h), so each clone is deterministic.
//
// Put US_CPU_CLONES on a leaf function that does a whole row or range (each call goes through the ifunc); what it
// calls must inline into it (US_CPU_INLINE), or that part runs at the baseline width.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(US_NO_ISA_CLONES)
#define US_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define US_CPU_CLONES
#endif

#define US_CPU_INLINE inline __attribute__((always_inline))
