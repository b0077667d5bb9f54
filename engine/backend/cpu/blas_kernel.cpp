#include "engine/backend/cpu/blas_kernel.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "engine/backend/cpu/gemm_bf16.h"
#include "engine/backend/cpu/peak.h"

namespace us::cpu {

namespace {

// Set in the re-executed process: what OpenBLAS had chosen before, and the guard against doing it twice.
constexpr const char* kReexecVariable = "ULTRASCOPE_OPENBLAS_FALLBACK";
// Testing only: pretend OpenBLAS chose this kernel (the fallback cannot be provoked on a CPU OpenBLAS knows).
constexpr const char* kFakeCoreVariable = "ULTRASCOPE_FAKE_OPENBLAS_CORE";

bool equal_ignoring_case(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

// OpenBLAS's x86-64 kernels without AVX2 + FMA: its generic fallback (Prescott) and older families.
constexpr std::array kPreAvx2Cores = {
    "Prescott",  "Core2",      "Penryn",      "Dunnington", "Nehalem", "Sandybridge",  "Atom",      "Banias",
    "Northwood", "Katmai",     "Coppermine",  "Athlon",     "Opteron", "Opteron_SSE3", "Barcelona", "Bobcat",
    "Bulldozer", "Piledriver", "Steamroller", "Excavator",  "Nano",    "Unknown"};

std::string current_core() {
    if (const char* fake = std::getenv(kFakeCoreVariable); fake && *fake) return fake;
    return openblas_core_name();
}

}  // namespace

CpuIsa CpuIsa::of_this_cpu() {
    CpuIsa isa;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    isa.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    isa.avx512f = __builtin_cpu_supports("avx512f");
    isa.avx512_bf16 = cpu_supports_avx512_bf16();
    isa.amd = __builtin_cpu_is("amd");
#endif
    return isa;
}

std::string better_openblas_coretype(std::string_view core, const CpuIsa& isa) {
    const bool pre_avx2 = std::any_of(kPreAvx2Cores.begin(), kPreAvx2Cores.end(),
                                      [&](const char* c) { return equal_ignoring_case(core, c); });
    if (!pre_avx2 || !isa.avx2) return "";
    if (isa.avx512_bf16) return "Cooperlake";
    if (isa.avx512f) return "SkylakeX";
    return isa.amd ? "Zen" : "Haswell";
}

void ensure_openblas_kernel(char** argv) {
    if (std::getenv("OPENBLAS_CORETYPE") || std::getenv(kReexecVariable)) return;  // the user's choice, or done
    const std::string core = current_core();
    const std::string better = better_openblas_coretype(core, CpuIsa::of_this_cpu());
    if (better.empty()) return;
    setenv("OPENBLAS_CORETYPE", better.c_str(), 1);
    setenv(kReexecVariable, core.c_str(), 1);
    execv("/proc/self/exe", argv);
    // Still here: run on the slow kernel rather than not at all, and say why.
    std::fprintf(stderr,
                 "warning: OpenBLAS chose its %s kernel for this CPU, and restarting with OPENBLAS_CORETYPE=%s "
                 "failed; set OPENBLAS_CORETYPE=%s yourself for the fast kernels\n",
                 core.c_str(), better.c_str(), better.c_str());
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(kReexecVariable);
}

std::string openblas_kernel_note() {
    const char* was = std::getenv(kReexecVariable);
    const char* now = std::getenv("OPENBLAS_CORETYPE");
    if (!was || !now) return "";
    return std::string("OPENBLAS_CORETYPE=") + now + " set by ultrascope: OpenBLAS had chosen " + was + " for this CPU";
}

}  // namespace us::cpu
