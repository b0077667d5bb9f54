// OpenBLAS's fallback to a generic kernel on a CPU it does not know (blas_kernel.h): which kernel family to ask for,
// and the re-execution with OPENBLAS_CORETYPE set, provoked here with ULTRASCOPE_FAKE_OPENBLAS_CORE (testing only)
// because this machine's OpenBLAS knows its CPU.
#include "engine/backend/cpu/blas_kernel.h"
#include "test_util.h"

using namespace us::test;
using us::cpu::better_openblas_coretype;
using us::cpu::CpuIsa;

TEST_CASE("a generic or pre-AVX2 OpenBLAS kernel on a newer CPU asks for that CPU's kernel family", "[cpu][blas]") {
    const CpuIsa avx2_intel{.avx2 = true}, avx2_amd{.avx2 = true, .amd = true};
    const CpuIsa avx512{.avx2 = true, .avx512f = true}, avx512_bf16{.avx2 = true, .avx512f = true, .avx512_bf16 = true};
    CHECK(better_openblas_coretype("Prescott", avx512_bf16) == "Cooperlake");  // 0.3.21 on a Xeon of model 207
    CHECK(better_openblas_coretype("prescott", avx512) == "SkylakeX");
    CHECK(better_openblas_coretype("Nehalem", avx2_intel) == "Haswell");
    CHECK(better_openblas_coretype("Sandybridge", avx2_amd) == "Zen");
    // the library's choice stands when it is already an AVX2 or AVX-512 kernel, or the CPU has nothing better
    CHECK(better_openblas_coretype("Zen", avx512_bf16).empty());
    CHECK(better_openblas_coretype("Haswell", avx2_intel).empty());
    CHECK(better_openblas_coretype("SkylakeX", avx512).empty());
    CHECK(better_openblas_coretype("Prescott", CpuIsa{}).empty());
}

TEST_CASE("the trainer restarts itself on the CPU's kernels when OpenBLAS fell back, and says so", "[cpu][blas][cli]") {
    const std::string clean = "env -u OPENBLAS_CORETYPE -u ULTRASCOPE_OPENBLAS_FALLBACK ";
    const std::string train = bin("ultrascope-train") + " --preset tiny --steps 1 --threads 1 --data " +
                              sample_data_file("blas-data.txt", 20000);
    const std::string want = better_openblas_coretype("Prescott", CpuIsa::of_this_cpu());
    if (want.empty()) {
        skip_test("this CPU has no AVX2: OpenBLAS's generic kernel is the right one here");
        return;
    }
    const ProcessResult fell_back = run_process(clean + "ULTRASCOPE_FAKE_OPENBLAS_CORE=Prescott " + train);
    INFO(fell_back.output);
    REQUIRE(fell_back.exit_code == 0);
    CHECK(fell_back.output.find("(OPENBLAS_CORETYPE=" + want +
                                " set by ultrascope: OpenBLAS had chosen Prescott for this CPU)") != std::string::npos);

    // Without the fake, a restart happens only where this machine's OpenBLAS really fell back: its own choice, seen
    // with the restart's guard set (so nothing is restarted), decides which.
    const ProcessResult own = run_process(clean + "ULTRASCOPE_OPENBLAS_FALLBACK=test " + train);
    REQUIRE(own.exit_code == 0);
    const size_t at = own.output.find("OpenBLAS ");
    REQUIRE(at != std::string::npos);
    const std::string own_core = own.output.substr(at + 9, own.output.find(' ', at + 9) - (at + 9));
    const bool really_fell_back = !better_openblas_coretype(own_core, CpuIsa::of_this_cpu()).empty();
    const ProcessResult normal = run_process(clean + train);
    INFO(normal.output);
    REQUIRE(normal.exit_code == 0);
    CHECK((normal.output.find("set by ultrascope") != std::string::npos) == really_fell_back);

    // the user's own OPENBLAS_CORETYPE is never overridden
    const ProcessResult chosen =
        run_process(clean + "OPENBLAS_CORETYPE=Haswell ULTRASCOPE_FAKE_OPENBLAS_CORE=Prescott " + train);
    INFO(chosen.output);
    REQUIRE(chosen.exit_code == 0);
    CHECK(chosen.output.find("set by ultrascope") == std::string::npos);
}
