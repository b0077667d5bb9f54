// Tests of the bf16 GEMM kernels (AVX-512 BF16, fp32 fallback) against a double reference on the same bf16
// inputs: all transpose combinations, odd sizes, padded leading dimensions, alpha/beta, fp32 and bf16 C.
// The padding around every operand holds NaN, so reading outside the matrices shows up.
#include <omp.h>

#include "catch_compat.h"
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/cpu/gemm_bf16.h"
#include "engine/backend/cpu/peak.h"
#include "test_util.h"

using us::bf16;
using us::DType;
using us::GemmArgs;
using us::Tensor;
using us::cpu::Bf16GemmKernel;

namespace {

constexpr uint16_t kNanBits = 0x7fc0;
constexpr int kSizes[] = {1, 2, 3, 15, 17, 31, 33, 64, 100, 257};

struct GemmCase {
    bool trans_a = false, trans_b = false;
    int m = 1, n = 1, k = 1;
    float alpha = 1.0f, beta = 0.0f;
    bool c_bf16 = false;
    bool nan_c = false;  // C's old contents are NaN (only meaningful with beta == 0)
    uint32_t seed = 1;

    std::string describe() const {
        return std::string(trans_a ? "T" : "N") + (trans_b ? "T" : "N") + " m=" + std::to_string(m) +
               " n=" + std::to_string(n) + " k=" + std::to_string(k) + " alpha=" + std::to_string(alpha) +
               " beta=" + std::to_string(beta) + (c_bf16 ? " C=bf16" : " C=fp32") + (nan_c ? " C=NaN" : "");
    }
};

// The operands of one case in storage order, with leading dimensions larger than the rows and NaN in the
// gaps.
struct GemmData {
    int a_rows, a_cols, lda, b_rows, b_cols, ldb, ldc;
    std::vector<bf16> a, b;
    std::vector<float> c_f32;  // initial C (fp32 case)
    std::vector<bf16> c_b16;   // initial C (bf16 case)

    explicit GemmData(const GemmCase& t) {
        std::mt19937 rng(t.seed);
        std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
        a_rows = t.trans_a ? t.k : t.m, a_cols = t.trans_a ? t.m : t.k, lda = a_cols + 3;
        b_rows = t.trans_b ? t.n : t.k, b_cols = t.trans_b ? t.k : t.n, ldb = b_cols + 5;
        ldc = t.n + 7;
        auto fill = [&](std::vector<bf16>& x, int rows, int cols, int ld) {
            x.assign(size_t(rows) * ld + 8, bf16{kNanBits});  // a tail past the last row too
            for (int r = 0; r < rows; ++r)
                for (int c = 0; c < cols; ++c) x[size_t(r) * ld + c] = us::f32_to_bf16(uni(rng));
        };
        fill(a, a_rows, a_cols, lda);
        fill(b, b_rows, b_cols, ldb);
        const float nan = std::numeric_limits<float>::quiet_NaN();
        c_f32.assign(size_t(t.m) * ldc, nan);
        c_b16.assign(size_t(t.m) * ldc, bf16{kNanBits});
        for (int i = 0; i < t.m; ++i)
            for (int j = 0; j < t.n; ++j) {
                const float v = t.nan_c ? nan : 2.0f * uni(rng);
                c_f32[size_t(i) * ldc + j] = v;
                c_b16[size_t(i) * ldc + j] = us::f32_to_bf16(v);
            }
    }

    float a_at(const GemmCase& t, int i, int kk) const {  // op(A)(i, kk)
        return us::bf16_to_f32(t.trans_a ? a[size_t(kk) * lda + i] : a[size_t(i) * lda + kk]);
    }
    float b_at(const GemmCase& t, int kk, int j) const {  // op(B)(kk, j)
        return us::bf16_to_f32(t.trans_b ? b[size_t(j) * ldb + kk] : b[size_t(kk) * ldb + j]);
    }
    float c_old(const GemmCase& t, int i, int j) const {
        return t.c_bf16 ? us::bf16_to_f32(c_b16[size_t(i) * ldc + j]) : c_f32[size_t(i) * ldc + j];
    }
};

// Runs one kernel on a copy of the case's C; returns C as fp32 in storage order (ldc), and the raw bf16 C.
struct GemmResult {
    std::vector<float> c;
    std::vector<bf16> c_b16;
};

GemmResult run_gemm(const GemmCase& t, const GemmData& d, Bf16GemmKernel kernel) {
    GemmResult r{d.c_f32, d.c_b16};
    GemmArgs g;
    g.trans_a = t.trans_a, g.trans_b = t.trans_b;
    g.m = t.m, g.n = t.n, g.k = t.k;
    g.alpha = t.alpha, g.beta = t.beta;
    g.a = Tensor::of(const_cast<bf16*>(d.a.data()), int64_t(d.a.size()));
    g.lda = d.lda;
    g.b = Tensor::of(const_cast<bf16*>(d.b.data()), int64_t(d.b.size()));
    g.ldb = d.ldb;
    g.c = t.c_bf16 ? Tensor::of(r.c_b16.data(), int64_t(r.c_b16.size())) : Tensor::of(r.c.data(), int64_t(r.c.size()));
    g.ldc = d.ldc;
    // NaN scratch: the kernel must not depend on it being zeroed.
    std::vector<float> scratch(us::cpu::gemm_bf16_scratch_floats(g, kernel), std::numeric_limits<float>::quiet_NaN());
    us::cpu::gemm_bf16(g, scratch.data(), kernel);
    if (t.c_bf16)
        for (size_t i = 0; i < r.c.size(); ++i) r.c[i] = us::bf16_to_f32(r.c_b16[i]);
    return r;
}

// The largest error of `got` over its tolerance (<= 1 passes). The tolerance is fp32 accumulation over k
// terms, relative to sum_k |a||b|, plus half an ulp of bf16 when C is bf16. The padding of C must stay
// untouched.
double worst_error_ratio(const GemmCase& t, const GemmData& d, const GemmResult& got) {
    const double u = std::ldexp(1.0, -24);
    double worst = 0.0;
    std::vector<double> a_row(t.k);
    for (int i = 0; i < t.m; ++i) {
        for (int kk = 0; kk < t.k; ++kk) a_row[kk] = d.a_at(t, i, kk);
        for (int j = 0; j < t.n; ++j) {
            double dot = 0.0, mag = 0.0;
            for (int kk = 0; kk < t.k; ++kk) {
                const double p = a_row[kk] * d.b_at(t, kk, j);
                dot += p;
                mag += std::fabs(p);
            }
            double want = double(t.alpha) * dot, scale = std::fabs(t.alpha) * mag;
            if (t.beta != 0.0f) {
                want += double(t.beta) * d.c_old(t, i, j);
                scale += std::fabs(double(t.beta) * d.c_old(t, i, j));
            }
            double tol = (t.k + 4) * u * scale + 1e-30;
            if (t.c_bf16) tol = 1.01 * (tol + std::ldexp(std::fabs(want) + tol, -8));
            const double have = got.c[size_t(i) * d.ldc + j];
            const double ratio = std::isfinite(have) ? std::fabs(have - want) / tol : 1e30;
            worst = std::max(worst, ratio);
        }
        for (int j = t.n; j < d.ldc; ++j) {  // the gap between rows of C is not C's
            const bool kept =
                t.c_bf16 ? got.c_b16[size_t(i) * d.ldc + j].bits == kNanBits : std::isnan(got.c[size_t(i) * d.ldc + j]);
            if (!kept) worst = 1e30;
        }
    }
    return worst;
}

bool avx512_available() {
    if (us::cpu::cpu_supports_avx512_bf16()) return true;
    us::test::skip_test("this CPU has no AVX-512 BF16; the avx512-bf16 kernel cannot run here");
    return false;
}

// A representative cross product: every pair of sizes in (m, n) for each transpose combination, k walking
// through the same list, with alpha, beta and C's type cycling so that each combination meets each of them.
std::vector<GemmCase> sweep_cases() {
    std::vector<GemmCase> cases;
    const float alphas[] = {1.0f, 0.5f}, betas[] = {0.0f, 1.0f, -0.75f};
    uint32_t seed = 1;
    for (int combo = 0; combo < 4; ++combo)
        for (int i = 0; i < 10; ++i)
            for (int j = 0; j < 10; ++j) {
                GemmCase t;
                t.trans_a = combo & 1, t.trans_b = combo & 2;
                t.m = kSizes[i], t.n = kSizes[j], t.k = kSizes[(3 * i + 7 * j + combo) % 10];
                t.alpha = alphas[(i + j) % 2];
                t.beta = betas[(i + 2 * j + combo) % 3];
                t.c_bf16 = (i + j + combo) % 4 >= 2;
                t.nan_c = t.beta == 0.0f && (i + combo) % 2 == 0;
                t.seed = seed++;
                cases.push_back(t);
            }
    return cases;
}

// Every alpha x beta x C type x transpose combination on two fixed shapes.
std::vector<GemmCase> parameter_cases() {
    std::vector<GemmCase> cases;
    const int shapes[][3] = {{33, 17, 31}, {100, 64, 257}};
    uint32_t seed = 1000;
    for (const auto& s : shapes)
        for (int combo = 0; combo < 4; ++combo)
            for (float alpha : {1.0f, 0.5f})
                for (float beta : {0.0f, 1.0f, -0.75f})
                    for (bool c_bf16 : {false, true})
                        for (bool nan_c : {false, true}) {
                            if (nan_c && beta != 0.0f) continue;
                            GemmCase t;
                            t.trans_a = combo & 1, t.trans_b = combo & 2;
                            t.m = s[0], t.n = s[1], t.k = s[2];
                            t.alpha = alpha, t.beta = beta, t.c_bf16 = c_bf16, t.nan_c = nan_c;
                            t.seed = seed++;
                            cases.push_back(t);
                        }
    return cases;
}

// Shapes past one tile in m or n and past one K block (odd K), as in training, per transpose combination.
std::vector<GemmCase> blocked_cases() {
    std::vector<GemmCase> cases;
    uint32_t seed = 2000;
    const int shapes[][3] = {{130, 417, 999}, {601, 45, 1537}};
    for (int combo = 0; combo < 4; ++combo)
        for (bool c_bf16 : {false, true}) {
            const auto& s = shapes[(combo + c_bf16) % 2];
            GemmCase t;
            t.trans_a = combo & 1, t.trans_b = combo & 2;
            t.m = s[0], t.n = s[1], t.k = s[2];
            t.alpha = c_bf16 ? 0.5f : 1.0f, t.beta = combo == 1 ? 1.0f : c_bf16 ? -0.75f : 0.0f;
            t.c_bf16 = c_bf16, t.nan_c = t.beta == 0.0f;
            t.seed = seed++;
            cases.push_back(t);
        }
    return cases;
}

void check_cases(Bf16GemmKernel kernel, const std::vector<GemmCase>& cases) {
    for (const auto& t : cases) {
        const GemmData d(t);
        const double ratio = worst_error_ratio(t, d, run_gemm(t, d, kernel));
        INFO(us::cpu::bf16_gemm_kernel_name(kernel) << " " << t.describe() << ": error / tolerance = " << ratio);
        CHECK(ratio <= 1.0);
    }
}

}  // namespace

TEST_CASE("gemm_bf16 avx512-bf16 matches a double reference over sizes", "[cpu][gemm_bf16]") {
    if (!avx512_available()) return;
    check_cases(Bf16GemmKernel::avx512_bf16, sweep_cases());
}

TEST_CASE("gemm_bf16 avx512-bf16 handles alpha, beta, C types and NaN C", "[cpu][gemm_bf16]") {
    if (!avx512_available()) return;
    check_cases(Bf16GemmKernel::avx512_bf16, parameter_cases());
}

TEST_CASE("gemm_bf16 avx512-bf16 across tiles and K blocks", "[cpu][gemm_bf16]") {
    if (!avx512_available()) return;
    check_cases(Bf16GemmKernel::avx512_bf16, blocked_cases());
}

TEST_CASE("gemm_bf16 fp32 fallback matches a double reference", "[cpu][gemm_bf16]") {
    check_cases(Bf16GemmKernel::fp32_sgemm, sweep_cases());
    check_cases(Bf16GemmKernel::fp32_sgemm, parameter_cases());
    check_cases(Bf16GemmKernel::fp32_sgemm, blocked_cases());
}

TEST_CASE("gemm_bf16 avx512-bf16 and the fp32 fallback agree", "[cpu][gemm_bf16]") {
    if (!avx512_available()) return;
    const double u = std::ldexp(1.0, -24);
    auto cases = parameter_cases();
    for (const auto& t : blocked_cases()) cases.push_back(t);
    for (const auto& t : cases) {
        const GemmData d(t);
        const auto fast = run_gemm(t, d, Bf16GemmKernel::avx512_bf16);
        const auto slow = run_gemm(t, d, Bf16GemmKernel::fp32_sgemm);
        // Both are within tolerance of the exact result, so within two tolerances of each other; the scale
        // here is the larger magnitude of the two results plus the sum of |a||b| bound through a single row
        // norm.
        double worst = 0.0;
        for (int i = 0; i < t.m; ++i)
            for (int j = 0; j < t.n; ++j) {
                double mag = 0.0;
                for (int kk = 0; kk < t.k; ++kk) mag += std::fabs(double(d.a_at(t, i, kk)) * d.b_at(t, kk, j));
                double tol =
                    2.0 * (t.k + 4) * u * (std::fabs(t.alpha) * mag + std::fabs(t.beta) * std::fabs(d.c_old(t, i, j)));
                const double x = fast.c[size_t(i) * d.ldc + j], y = slow.c[size_t(i) * d.ldc + j];
                if (t.c_bf16) tol += std::ldexp(std::max(std::fabs(x), std::fabs(y)), -7);  // one bf16 ulp apart
                worst = std::max(worst, std::isfinite(x) && std::isfinite(y) ? std::fabs(x - y) / (tol + 1e-30) : 1e30);
            }
        INFO(t.describe() << ": difference / tolerance = " << worst);
        CHECK(worst <= 1.0);
    }
}

TEST_CASE("gemm_bf16 avx512-bf16 rounds bf16 C like f32_to_bf16", "[cpu][gemm_bf16]") {
    if (!avx512_available()) return;
    // With k = 1, alpha = 1 and beta = 0 each output is one product, exact in fp32: only the store rounds.
    for (bool ta : {false, true})
        for (bool tb : {false, true}) {
            GemmCase t;
            t.trans_a = ta, t.trans_b = tb, t.m = 37, t.n = 45, t.k = 1, t.c_bf16 = true, t.seed = 77;
            const GemmData d(t);
            const auto got = run_gemm(t, d, Bf16GemmKernel::avx512_bf16);
            int mismatches = 0;
            for (int i = 0; i < t.m; ++i)
                for (int j = 0; j < t.n; ++j)
                    mismatches += got.c_b16[size_t(i) * d.ldc + j].bits !=
                                  us::f32_to_bf16(d.a_at(t, i, 0) * d.b_at(t, 0, j)).bits;
            INFO(t.describe());
            CHECK(mismatches == 0);
        }
}

TEST_CASE("gemm_bf16 avx512-bf16 is deterministic across runs, thread counts and nesting", "[cpu][gemm_bf16]") {
    if (!avx512_available()) return;
    GemmCase t;
    t.trans_a = true, t.m = 200, t.n = 300, t.k = 777, t.beta = 1.0f, t.c_bf16 = false, t.seed = 99;
    const GemmData d(t);
    const auto first = run_gemm(t, d, Bf16GemmKernel::avx512_bf16);
    const auto again = run_gemm(t, d, Bf16GemmKernel::avx512_bf16);
    CHECK(std::memcmp(first.c.data(), again.c.data(), first.c.size() * sizeof(float)) == 0);

    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const auto serial = run_gemm(t, d, Bf16GemmKernel::avx512_bf16);
    omp_set_num_threads(threads);
    CHECK(std::memcmp(first.c.data(), serial.c.data(), first.c.size() * sizeof(float)) == 0);

    // Called from inside a parallel region, each call runs on its own thread and still gives the same bits.
    std::vector<GemmResult> nested(2);
#pragma omp parallel for num_threads(2)
    for (int r = 0; r < 2; ++r) nested[r] = run_gemm(t, d, Bf16GemmKernel::avx512_bf16);
    for (const auto& r : nested) CHECK(std::memcmp(first.c.data(), r.c.data(), first.c.size() * sizeof(float)) == 0);
}

TEST_CASE("gemm_bf16 automatic choice: the rule for this CPU and OpenBLAS, overridden by US_BF16_GEMM",
          "[cpu][gemm_bf16]") {
    const char* old = std::getenv("US_BF16_GEMM");
    const std::string saved = old ? old : "";
    unsetenv("US_BF16_GEMM");
    CHECK(us::cpu::resolve_bf16_gemm_kernel(Bf16GemmKernel::automatic) ==
          us::cpu::automatic_bf16_gemm_kernel(us::cpu::cpu_supports_avx512_bf16(), us::cpu::openblas_core_name()));
    setenv("US_BF16_GEMM", "sgemm", 1);
    CHECK(us::cpu::resolve_bf16_gemm_kernel(Bf16GemmKernel::automatic) == Bf16GemmKernel::fp32_sgemm);
    setenv("US_BF16_GEMM", "avx512", 1);
    const auto asked = us::cpu::cpu_supports_avx512_bf16() ? Bf16GemmKernel::avx512_bf16 : Bf16GemmKernel::fp32_sgemm;
    CHECK(us::cpu::resolve_bf16_gemm_kernel(Bf16GemmKernel::automatic) == asked);
    CHECK(us::cpu::resolve_bf16_gemm_kernel(Bf16GemmKernel::avx512_bf16) == Bf16GemmKernel::avx512_bf16);
    if (old)
        setenv("US_BF16_GEMM", saved.c_str(), 1);
    else
        unsetenv("US_BF16_GEMM");
}

TEST_CASE("gemm_bf16: automatic takes the AVX-512 BF16 kernel where OpenBLAS's sgemm is 256-bit", "[cpu][gemm_bf16]") {
    using us::cpu::automatic_bf16_gemm_kernel;
    using K = us::cpu::Bf16GemmKernel;
    // Measured (docs/performance.md): the kernel 3.2-3.9x OpenBLAS's Haswell sgemm on a Zen 4, slower than its
    // Cooperlake sgemm on a Xeon. Without the instructions, always the fallback.
    for (const char* core : {"Haswell", "Zen", "HASWELL", "Prescott"}) {
        INFO(core);
        CHECK(automatic_bf16_gemm_kernel(true, core) == K::avx512_bf16);
        CHECK(automatic_bf16_gemm_kernel(false, core) == K::fp32_sgemm);
    }
    for (const char* core : {"SkylakeX", "Cooperlake", "SapphireRapids", "cooperlake"}) {
        INFO(core);
        CHECK(automatic_bf16_gemm_kernel(true, core) == K::fp32_sgemm);
    }
}
