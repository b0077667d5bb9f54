// small_sgemm, the attention's products (engine/backend/cpu/small_sgemm.h): both paths against a double reference on
// shapes that take every edge of the register tiles (rows left over from 6, columns from 16 and 8, k past one
// 256-deep pass, A^T read in place or handed to OpenBLAS), with beta 0 never reading C; the causal skips, and that
// the tiles really leave out what they allow; the naive (probabilities kept or recomputed) and the blockwise
// attention (diagonal and full chunk pairs), forward and backward, give the same values on both paths.
#include <cmath>
#include <limits>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/small_sgemm.h"
#include "test_util.h"

using namespace us;
using namespace us::test;
using cpu::SmallSgemmPath;

namespace {

struct Shape {
    bool trans_a;
    int m, n, k, lda_extra;  // lda = (trans_a ? m : k) + lda_extra
};

// Restores the CPU's default path when a test leaves, passing or failing.
struct PathGuard {
    SmallSgemmPath saved = cpu::small_sgemm_path();
    ~PathGuard() { cpu::set_small_sgemm_path(saved); }
};

std::vector<SmallSgemmPath> paths_here() {
    std::vector<SmallSgemmPath> paths{SmallSgemmPath::blas};
    if (cpu::small_sgemm_tiles_supported()) paths.push_back(SmallSgemmPath::tiles);
    return paths;
}

// Worst |got - want| / (|alpha| sum_p |A(i,p) B(p,j)| + |beta C0|) over the wanted entries of C, or infinity where
// beta 0 read C's NaN. With a causal skip, A is zero where the skip says it is, and C is checked where it is wanted.
double worst_error(const Shape& s, SmallSgemmPath path, float alpha, float beta, cpu::CausalSkip skip = {}) {
    using Skip = cpu::CausalSkip;
    const int lda = (s.trans_a ? s.m : s.k) + s.lda_extra, ldb = s.n + 3, ldc = s.n + 5;
    auto a = random_vector(size_t(s.trans_a ? s.k : s.m) * lda, 11);
    auto b = random_vector(size_t(s.k) * ldb, 12);
    auto c0 = random_vector(size_t(s.m) * ldc, 13);
    if (beta == 0.0f) std::fill(c0.begin(), c0.end(), std::numeric_limits<float>::quiet_NaN());
    for (int i = 0; i < s.m; ++i)
        for (int p = 0; p < s.k; ++p) {
            const bool zero = (skip.kind == Skip::a_zero_after && p > i + skip.offset) ||
                              (skip.kind == Skip::a_zero_before && p < i - skip.offset);
            if (zero) a[s.trans_a ? size_t(p) * lda + i : size_t(i) * lda + p] = 0.0f;
        }
    std::vector<float> c = c0, panel(cpu::small_sgemm_panel_floats(s.k));
    cpu::set_small_sgemm_path(path);
    cpu::small_sgemm(s.trans_a, s.m, s.n, s.k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc, panel.data(),
                     skip);
    double worst = 0.0;
    for (int i = 0; i < s.m; ++i)
        for (int j = 0; j < s.n; ++j) {
            if ((skip.kind == Skip::wanted_columns_upto && j > i + skip.offset) ||
                (skip.kind == Skip::wanted_columns_from && j < i - skip.offset))
                continue;
            double sum = 0.0, magnitude = 0.0;
            for (int p = 0; p < s.k; ++p) {
                const double x = s.trans_a ? a[size_t(p) * lda + i] : a[size_t(i) * lda + p];
                sum += x * b[size_t(p) * ldb + j];
                magnitude += std::abs(x * b[size_t(p) * ldb + j]);
            }
            const double c_in = beta == 0.0f ? 0.0 : c0[size_t(i) * ldc + j];
            const double want = alpha * sum + beta * c_in;
            const double scale = std::abs(alpha) * magnitude + std::abs(beta * c_in) + 1e-30;
            const double got = c[size_t(i) * ldc + j];
            worst = std::max(worst, std::isfinite(got) ? std::abs(got - want) / scale : 1e30);
        }
    for (int i = 0; i < s.m; ++i)  // the gap between C's rows is not C's
        for (int j = s.n; j < ldc; ++j)
            if (!(c[size_t(i) * ldc + j] == c0[size_t(i) * ldc + j] ||
                  (std::isnan(c[size_t(i) * ldc + j]) && std::isnan(c0[size_t(i) * ldc + j]))))
                worst = 1e30;
    return worst;
}

}  // namespace

TEST_CASE("small_sgemm equals a double reference on both paths at every tile edge", "[cpu][ops][small_sgemm]") {
    PathGuard guard;
    const std::vector<Shape> shapes = {
        {false, 1, 1, 1, 0},     {false, 6, 16, 64, 0},    {false, 7, 23, 5, 2},   {false, 64, 64, 64, 700},
        {false, 67, 37, 300, 1}, {false, 13, 130, 257, 0}, {true, 1, 1, 1, 0},     {true, 6, 16, 64, 0},
        {true, 11, 29, 70, 4},   {true, 64, 64, 513, 9},   {true, 600, 24, 40, 0}, {false, 5, 8, 0, 0},
    };
    for (SmallSgemmPath path : paths_here())
        for (const Shape& s : shapes)
            for (float beta : {0.0f, 1.0f, 0.5f}) {
                INFO(cpu::small_sgemm_path_name(path)
                     << ": trans_a " << s.trans_a << ", m " << s.m << ", n " << s.n << ", k " << s.k << ", lda + "
                     << s.lda_extra << ", beta " << beta);
                CHECK(worst_error(s, path, 0.7f, beta) < 1e-5);
            }
}

TEST_CASE("small_sgemm's causal skips leave out only masked terms and unwanted entries", "[cpu][ops][small_sgemm]") {
    PathGuard guard;
    using Skip = cpu::CausalSkip;
    for (SmallSgemmPath path : paths_here())
        for (Skip::Kind kind :
             {Skip::wanted_columns_upto, Skip::wanted_columns_from, Skip::a_zero_after, Skip::a_zero_before})
            for (int offset : {0, 7, 64, -5})
                for (const Shape& s : {Shape{false, 70, 300, 300, 3}, Shape{true, 70, 40, 300, 3}})
                    for (float beta : {0.0f, 1.0f}) {
                        INFO(cpu::small_sgemm_path_name(path) << ": skip " << int(kind) << " offset " << offset
                                                              << ", trans_a " << s.trans_a << ", beta " << beta);
                        CHECK(worst_error(s, path, 0.7f, beta, Skip{kind, offset}) < 1e-5);
                    }
}

TEST_CASE("the register tiles really leave out what a causal skip allows", "[cpu][ops][small_sgemm]") {
    if (!cpu::small_sgemm_tiles_supported()) {
        skip_test("this CPU has no AVX2 + FMA; the register tiles cannot run here");
        return;
    }
    PathGuard guard;
    cpu::set_small_sgemm_path(SmallSgemmPath::tiles);
    using Skip = cpu::CausalSkip;
    const int m = 12, n = 64, k = 64;
    auto a = random_vector(size_t(m) * k, 31), b = random_vector(size_t(k) * n, 32);
    std::vector<float> panel(cpu::small_sgemm_panel_floats(k));
    const float nan = std::numeric_limits<float>::quiet_NaN();
    // Unwanted tiles are not written: rows 0..5 want columns 0..5 only, so their panels from column 16 on stay NaN.
    std::vector<float> c(size_t(m) * n, nan);
    cpu::small_sgemm(false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n, panel.data(),
                     {Skip::wanted_columns_upto, 0});
    CHECK(std::isfinite(c[0]));
    CHECK(std::isnan(c[40]));
    CHECK(std::isfinite(c[size_t(11) * n + 11]));
    CHECK(std::isnan(c[size_t(11) * n + 40]));
    // Masked depth is not read: NaN where no row of a tile may see (p >= the tile's last row + 1), finite results.
    for (int i = 0; i < m; ++i)
        for (int p = (i / 6 + 1) * 6; p < k; ++p) a[size_t(i) * k + p] = nan;
    cpu::small_sgemm(false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n, panel.data(),
                     {Skip::a_zero_after, 0});
    size_t finite = 0;
    for (float x : c) finite += std::isfinite(x);
    CHECK(finite == c.size());
}

TEST_CASE("the attention kernels give the same values with register tiles as with OpenBLAS",
          "[cpu][ops][small_sgemm]") {
    if (!cpu::small_sgemm_tiles_supported()) {
        skip_test("this CPU has no AVX2 + FMA; the register tiles cannot run here");
        return;
    }
    PathGuard guard;
    static CpuBackend be(2);
    // T = 150 takes partial query and key blocks; T = 600 makes the naive backward's A^T rows longer than the tiles
    // read in place, so those products go to OpenBLAS mid-kernel; HD = 24 takes a 16- and an 8-column panel.
    for (auto [T, HD] : {std::pair{150, 64}, std::pair{600, 64}, std::pair{150, 24}}) {
        INFO("T " << T << ", HD " << HD);
        const int B = 1, NH = 2, C = NH * HD;
        auto qkv = random_vector(size_t(B) * T * 3 * C, 21), dout = random_vector(size_t(B) * T * C, 22);
        struct Result {
            std::vector<float> naive_out, naive_dqkv, recomputed_dqkv, flash_out, flash_dqkv;
        };
        auto run = [&](SmallSgemmPath path) {
            cpu::set_small_sgemm_path(path);
            Result r;
            r.naive_out.resize(size_t(B) * T * C), r.naive_dqkv.resize(qkv.size());
            std::vector<float> probs(size_t(B) * NH * T * T);
            be.attention_forward(tensor_of(r.naive_out), tensor_of(probs), tensor_of(qkv), B, T, NH, HD);
            be.attention_backward(tensor_of(r.naive_dqkv), tensor_of(dout), tensor_of(qkv), tensor_of(probs), B, T, NH,
                                  HD);
            r.recomputed_dqkv.resize(qkv.size());  // the probabilities recomputed from q and k in backward
            be.attention_backward(tensor_of(r.recomputed_dqkv), tensor_of(dout), tensor_of(qkv), Tensor{}, B, T, NH,
                                  HD);
            std::vector<float> acc(size_t(B) * T * C, 0.0f), mx(size_t(B) * NH * T, 0.0f), sm(mx.size(), 0.0f),
                lse(mx.size()), delta(mx.size()), dq(acc.size(), 0.0f), dkv(size_t(B) * T * 2 * C, 0.0f);
            r.flash_out.resize(acc.size()), r.flash_dqkv.resize(qkv.size());
            // Two chunks of T / 2: both diagonals and one pair that sees every key of its chunk.
            const AttentionChunkPair pairs[] = {{0, 0, true}, {1, 0, false}, {1, 1, true}};
            const AttentionBlockArgs args{
                tensor_of(qkv), tensor_of(qkv).slice(C, int64_t(qkv.size()) - C), B, T, NH, HD, T / 2, pairs, 3, 3 * C};
            be.attention_block_forward(args, tensor_of(acc), tensor_of(mx), tensor_of(sm));
            be.attention_block_finish(tensor_of(r.flash_out), tensor_of(lse), tensor_of(acc), tensor_of(mx),
                                      tensor_of(sm), B, T, NH, HD);
            be.attention_block_delta(tensor_of(delta), tensor_of(dout), tensor_of(r.flash_out), B, T, NH, HD);
            be.attention_block_backward(args, tensor_of(dq), tensor_of(dkv), tensor_of(dout), tensor_of(lse),
                                        tensor_of(delta));
            be.attention_block_store_grads(tensor_of(r.flash_dqkv), tensor_of(dq), tensor_of(dkv), B, T, C);
            return r;
        };
        const Result blas = run(SmallSgemmPath::blas), tiles = run(SmallSgemmPath::tiles);
        auto same = [](const std::vector<float>& got, const std::vector<float>& want) {
            size_t off = 0;
            for (size_t i = 0; i < got.size(); ++i)
                if (!(std::abs(got[i] - want[i]) <= 1e-5 * std::abs(want[i]) + 1e-6)) ++off;
            return off;
        };
        CHECK(same(tiles.naive_out, blas.naive_out) == 0);
        CHECK(same(tiles.naive_dqkv, blas.naive_dqkv) == 0);
        CHECK(same(tiles.recomputed_dqkv, blas.recomputed_dqkv) == 0);
        CHECK(same(tiles.flash_out, blas.flash_out) == 0);
        CHECK(same(tiles.flash_dqkv, blas.flash_dqkv) == 0);
    }
}
