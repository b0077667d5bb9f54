// Finite-difference gradient checks of every op of the CPU backend, in fp32: for an op y = f(x) and a fixed
// random R, the backward of dy = R must match d(sum(y * R))/dx by central differences.
#include <array>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/fast_math.h"
#include "test_util.h"

using namespace us;
using namespace us::test;

namespace {
CpuBackend& backend() {
    static CpuBackend be(2);
    return be;
}
}  // namespace

TEST_CASE("layernorm backward matches finite differences", "[cpu][ops][gradcheck]") {
    const int N = 5, C = 12;
    auto x = random_vector(N * C, 1), w = random_vector(C, 2, 0.3f), b = random_vector(C, 3),
         R = random_vector(N * C, 4);
    for (auto& v : w) v += 1.0f;
    std::vector<float> y(N * C), mean(N), rstd(N);
    auto loss = [&] {
        backend().layernorm_forward(tensor_of(y), tensor_of(mean), tensor_of(rstd), tensor_of(x), tensor_of(w),
                                    tensor_of(b), N, C);
        return dot(y, R);
    };
    loss();
    std::vector<float> dx(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
    backend().layernorm_backward(tensor_of(dx), tensor_of(dw), tensor_of(db), tensor_of(R), tensor_of(x), tensor_of(w),
                                 tensor_of(mean), tensor_of(rstd), N, C);
    check_gradient("dx", x, dx, loss);
    check_gradient("dweight", w, dw, loss);
    check_gradient("dbias", b, db, loss);
}

TEST_CASE("gelu backward matches finite differences", "[cpu][ops][gradcheck]") {
    auto x = random_vector(64, 5, 2.0f), R = random_vector(64, 6);
    std::vector<float> y(64), dx(64);
    auto loss = [&] {
        backend().gelu_forward(tensor_of(y), tensor_of(x));
        return dot(y, R);
    };
    backend().gelu_backward(tensor_of(dx), tensor_of(x), tensor_of(R));
    check_gradient("dx", x, dx, loss, {.eps = 1e-3, .samples = 64});
}

TEST_CASE("rope backward matches finite differences", "[cpu][ops][gradcheck]") {
    const int B = 2, T = 5, NH = 2, HD = 4, C = NH * HD;
    auto x = random_vector(B * T * 3 * C, 7), R = random_vector(B * T * 3 * C, 8);
    auto loss = [&] {
        std::vector<float> y = x;
        backend().rope_forward(tensor_of(y), B, T, NH, HD, Tensor{});
        return dot(y, R);
    };
    std::vector<float> dx = R;
    backend().rope_backward(tensor_of(dx), B, T, NH, HD, Tensor{});
    check_gradient("dqkv", x, dx, loss, {.samples = 60});
}

TEST_CASE("rope rotates pairs (i, i + HD/2) by t * 10000^(-2i/HD)", "[cpu][ops]") {
    const int B = 1, T = 3, NH = 1, HD = 4, C = 4;
    std::vector<float> qkv(B * T * 3 * C, 0.0f);
    for (int t = 0; t < T; ++t) qkv[size_t(t) * 3 * C + 0] = 1.0f;  // q[t][0] = 1: rotates into q[t][2]
    backend().rope_forward(tensor_of(qkv), B, T, NH, HD, Tensor{});
    for (int t = 0; t < T; ++t) {
        CHECK(qkv[size_t(t) * 3 * C + 0] == Approx(std::cos(double(t))).margin(1e-6));
        CHECK(qkv[size_t(t) * 3 * C + 2] == Approx(std::sin(double(t))).margin(1e-6));
    }
}

TEST_CASE("attention backward matches finite differences, with saved and recomputed probabilities",
          "[cpu][ops][gradcheck]") {
    const int B = 2, T = 6, NH = 2, HD = 4, C = NH * HD;
    auto x = random_vector(B * T * 3 * C, 9, 0.7f), R = random_vector(B * T * C, 10);
    std::vector<float> y(B * T * C), probs(B * NH * T * T);
    auto loss = [&] {
        backend().attention_forward(tensor_of(y), tensor_of(probs), tensor_of(x), B, T, NH, HD);
        return dot(y, R);
    };
    loss();
    std::vector<float> dx_saved(x.size()), dx_recomputed(x.size());
    backend().attention_backward(tensor_of(dx_saved), tensor_of(R), tensor_of(x), tensor_of(probs), B, T, NH, HD);
    backend().attention_backward(tensor_of(dx_recomputed), tensor_of(R), tensor_of(x), Tensor{}, B, T, NH, HD);
    check_gradient("dqkv", x, dx_saved, loss, {.samples = 80});
    for (size_t i = 0; i < x.size(); ++i) REQUIRE(dx_saved[i] == dx_recomputed[i]);
    // causality: the output at t depends on no position after t
    loss();  // y for the unperturbed x again
    std::vector<float> y2(y.size());
    auto x2 = x;
    x2[size_t((0 * T + T - 1) * 3 * C + C + 1)] += 1.0f;  // perturb k at the last position
    backend().attention_forward(tensor_of(y2), Tensor{}, tensor_of(x2), B, T, NH, HD);
    for (int t = 0; t < T - 1; ++t)
        for (int i = 0; i < C; ++i) CHECK(y2[size_t(t * C + i)] == y[size_t(t * C + i)]);
}

// The kernels take the products by blocks of 64 query rows, each over the keys it sees: T = 150 has two whole
// blocks and a partial one.
TEST_CASE("attention over several row blocks equals softmax(QK^T) V and matches finite differences",
          "[cpu][ops][gradcheck]") {
    const int B = 1, T = 150, NH = 2, HD = 4, C = NH * HD;
    auto x = random_vector(B * T * 3 * C, 21, 0.7f), R = random_vector(B * T * C, 22);
    std::vector<float> y(B * T * C), probs(B * NH * T * T);
    backend().attention_forward(tensor_of(y), tensor_of(probs), tensor_of(x), B, T, NH, HD);
    for (int h = 0; h < NH; ++h)
        for (int t = 0; t < T; ++t) {  // the same in double, one row at a time
            const float* q = &x[size_t(t) * 3 * C + h * HD];
            std::vector<double> p(size_t(t) + 1);
            double maxv = -1e300, sum = 0.0;
            for (int j = 0; j <= t; ++j) {
                const float* k = &x[size_t(j) * 3 * C + C + h * HD];
                double s = 0.0;
                for (int i = 0; i < HD; ++i) s += double(q[i]) * k[i];
                p[size_t(j)] = s / std::sqrt(double(HD));
                maxv = std::max(maxv, p[size_t(j)]);
            }
            for (auto& v : p) sum += (v = std::exp(v - maxv));
            for (int j = 0; j < T; ++j) {
                const double want = j <= t ? p[size_t(j)] / sum : 0.0;
                REQUIRE(probs[(size_t(h) * T + t) * T + j] == Approx(want).margin(1e-6));
            }
            for (int i = 0; i < HD; ++i) {
                double o = 0.0;
                for (int j = 0; j <= t; ++j) o += p[size_t(j)] / sum * x[size_t(j) * 3 * C + 2 * C + h * HD + i];
                REQUIRE(y[size_t(t) * C + h * HD + i] == Approx(o).margin(1e-5));
            }
        }
    auto loss = [&] {
        backend().attention_forward(tensor_of(y), Tensor{}, tensor_of(x), B, T, NH, HD);
        return dot(y, R);
    };
    std::vector<float> dx_saved(x.size()), dx_recomputed(x.size());
    backend().attention_backward(tensor_of(dx_saved), tensor_of(R), tensor_of(x), tensor_of(probs), B, T, NH, HD);
    backend().attention_backward(tensor_of(dx_recomputed), tensor_of(R), tensor_of(x), Tensor{}, B, T, NH, HD);
    for (size_t i = 0; i < x.size(); ++i) REQUIRE(dx_saved[i] == dx_recomputed[i]);
    check_gradient("dqkv", x, dx_saved, loss, {.samples = 120});
}

TEST_CASE("embedding backward matches finite differences", "[cpu][ops][gradcheck]") {
    const int V = 10, C = 6, N = 9;
    std::vector<int32_t> tok = {1, 3, 3, 0, 9, 1, 1, 7, 2};
    auto wte = random_vector(V * C, 11), R = random_vector(N * C, 12);
    std::vector<float> y(N * C), dw(V * C, 0.0f);
    auto loss = [&] {
        backend().embedding_forward(tensor_of(y), Tensor::of(tok.data(), N), tensor_of(wte), N, C, 0, V);
        return dot(y, R);
    };
    backend().embedding_backward(tensor_of(dw), tensor_of(R), Tensor::of(tok.data(), N), N, C, 0, V);
    check_gradient("dwte", wte, dw, loss, {.samples = 60});
}

TEST_CASE("cross-entropy backward matches finite differences", "[cpu][ops][gradcheck]") {
    const int N = 4, V = 9;
    auto logits = random_vector(N * V, 13, 2.0f);
    std::vector<int32_t> tgt = {0, 8, 3, 3};
    const float dloss = 0.25f;
    auto loss = [&] {
        std::vector<float> z = logits, losses(N);
        backend().crossentropy_forward(tensor_of(losses), tensor_of(z), Tensor::of(tgt.data(), N), N, V);
        double s = 0;
        for (float l : losses) s += l;
        return s * dloss;
    };
    std::vector<float> z = logits, losses(N);
    backend().crossentropy_forward(tensor_of(losses), tensor_of(z), Tensor::of(tgt.data(), N), N, V);
    // bf16 runs write the gradient in bf16 from the fp32 probabilities: the fp32 gradient, rounded
    std::vector<bf16> z16(size_t(N) * V);
    backend().crossentropy_backward(Tensor::of(z16.data(), N * V), tensor_of(z), Tensor::of(tgt.data(), N), dloss, N, V,
                                    0);
    backend().crossentropy_backward(tensor_of(z), tensor_of(z), Tensor::of(tgt.data(), N), dloss, N, V, 0);
    check_gradient("dlogits", logits, z, loss, {.samples = 36});
    for (size_t i = 0; i < z.size(); ++i) CHECK(bf16_to_f32(z16[i]) == bf16_to_f32(f32_to_bf16(z[i])));
    // the loss of a row is -log softmax at the target
    double ref = 0, mx = -1e30, sum = 0;
    for (int i = 0; i < V; ++i) mx = std::max(mx, double(logits[size_t(i)]));
    for (int i = 0; i < V; ++i) sum += std::exp(double(logits[size_t(i)]) - mx);
    ref = -(double(logits[0]) - mx - std::log(sum));
    CHECK(losses[0] == Approx(ref).epsilon(1e-5));
}

TEST_CASE("linear layer (gemm + bias) backward matches finite differences", "[cpu][ops][gradcheck]") {
    const int N = 6, IC = 5, OC = 7;
    auto x = random_vector(N * IC, 14), w = random_vector(OC * IC, 15), b = random_vector(OC, 16);
    auto R = random_vector(N * OC, 17);
    std::vector<float> y(N * OC);
    auto forward = [&] {
        GemmArgs g;
        g.trans_b = true;
        g.m = N, g.n = OC, g.k = IC;
        g.a = tensor_of(x), g.lda = IC;
        g.b = tensor_of(w), g.ldb = IC;
        g.c = tensor_of(y), g.ldc = OC;
        backend().gemm(g);
        backend().add_bias(tensor_of(y), tensor_of(b), N, OC);
        return dot(y, R);
    };
    std::vector<float> dx(N * IC), dw(OC * IC, 0.0f), db(OC, 0.0f);
    GemmArgs gi;  // dx = R @ w
    gi.m = N, gi.n = IC, gi.k = OC;
    gi.a = tensor_of(R), gi.lda = OC;
    gi.b = tensor_of(w), gi.ldb = IC;
    gi.c = tensor_of(dx), gi.ldc = IC;
    backend().gemm(gi);
    GemmArgs gw;  // dw += R^T @ x
    gw.trans_a = true;
    gw.m = OC, gw.n = IC, gw.k = N;
    gw.beta = 1.0f;
    gw.a = tensor_of(R), gw.lda = OC;
    gw.b = tensor_of(x), gw.ldb = IC;
    gw.c = tensor_of(dw), gw.ldc = IC;
    backend().gemm(gw);
    backend().bias_backward(tensor_of(db), tensor_of(R), N, OC);
    check_gradient("dx", x, dx, forward);
    check_gradient("dweight", w, dw, forward);
    check_gradient("dbias", b, db, forward);
}

// On 2 threads a large fp32 GEMM runs as one sgemm per thread on a slice of C (rows when m >= n, else columns):
// every transpose, odd sizes, alpha and beta against a plain triple loop.
TEST_CASE("fp32 gemm sliced over threads equals the plain product", "[cpu][ops]") {
    for (const auto [m, n, k] : {std::array{300, 70, 130}, std::array{70, 301, 129}}) {
        for (const bool ta : {false, true})
            for (const bool tb : {false, true}) {
                INFO("m " << m << " n " << n << " k " << k << " trans_a " << ta << " trans_b " << tb);
                auto A = random_vector(size_t(m) * k, 31), B = random_vector(size_t(k) * n, 32),
                     C = random_vector(size_t(m) * n, 33);
                const std::vector<float> C0 = C;
                GemmArgs g;
                g.trans_a = ta, g.trans_b = tb;
                g.m = m, g.n = n, g.k = k;
                g.alpha = 0.5f, g.beta = 0.25f;
                g.a = tensor_of(A), g.lda = ta ? m : k;
                g.b = tensor_of(B), g.ldb = tb ? k : n;
                g.c = tensor_of(C), g.ldc = n;
                backend().gemm(g);
                for (int i = 0; i < m; ++i)
                    for (int j = 0; j < n; ++j) {
                        double s = 0.0;
                        for (int p = 0; p < k; ++p)
                            s += double(ta ? A[size_t(p) * m + i] : A[size_t(i) * k + p]) *
                                 double(tb ? B[size_t(j) * k + p] : B[size_t(p) * n + j]);
                        const double want = 0.5 * s + 0.25 * C0[size_t(i) * n + j];
                        REQUIRE(C[size_t(i) * n + j] == Approx(want).margin(1e-4));
                    }
            }
    }
}

TEST_CASE("residual add and accumulate", "[cpu][ops]") {
    auto a = random_vector(33, 18), b = random_vector(33, 19);
    std::vector<float> y(33);
    backend().residual_forward(tensor_of(y), tensor_of(a), tensor_of(b));
    for (size_t i = 0; i < y.size(); ++i) CHECK(y[i] == a[i] + b[i]);
    backend().accumulate(tensor_of(y), tensor_of(a));
    for (size_t i = 0; i < y.size(); ++i) CHECK(y[i] == (a[i] + b[i]) + a[i]);
    CHECK(backend().sum_squares(tensor_of(a)) == Approx(dot(a, a)).epsilon(1e-12));
}

TEST_CASE("adamw step equals torch.optim.AdamW's formula", "[cpu][ops][optim]") {
    const int n = 40;
    auto p = random_vector(n, 20), g = random_vector(n, 21), m = random_vector(n, 22, 0.1f), v = random_vector(n, 23);
    for (auto& x : v) x = x * x * 0.01f;
    auto p0 = p, m0 = m, v0 = v;
    AdamWArgs a;
    a.params = tensor_of(p);
    a.grads = tensor_of(g);
    a.m = tensor_of(m);
    a.v = tensor_of(v);
    a.lr = 1e-2, a.beta1 = 0.9, a.beta2 = 0.95, a.eps = 1e-8, a.weight_decay = 0.1, a.grad_scale = 0.5f, a.step = 3;
    backend().adamw(a);
    for (int i = 0; i < n; ++i) {
        const double gr = double(g[size_t(i)]) * 0.5;
        const double mm = 0.9 * m0[size_t(i)] + 0.1 * gr, vv = 0.95 * v0[size_t(i)] + 0.05 * gr * gr;
        const double mhat = mm / (1 - std::pow(0.9, 3)), vhat = vv / (1 - std::pow(0.95, 3));
        const double w = p0[size_t(i)] * (1 - 1e-2 * 0.1) - 1e-2 * mhat / (std::sqrt(vhat) + 1e-8);
        CHECK(p[size_t(i)] == Approx(w).epsilon(1e-5));
        CHECK(m[size_t(i)] == Approx(mm).epsilon(1e-5));
    }
}

TEST_CASE("the vectorised exp and tanh are accurate to a few ulp", "[cpu][ops]") {
    double exp_rel = 0, tanh_abs = 0;
    for (float x = -87.0f; x <= 0.0f; x += 1e-3f)
        exp_rel = std::max(exp_rel, std::abs(cpu::exp_nonpositive(x) - std::exp(double(x))) / std::exp(double(x)));
    for (float u = -12.0f; u < 12.0f; u += 1e-4f)
        tanh_abs = std::max(tanh_abs, std::abs(cpu::tanh_fast(u) - std::tanh(double(u))));
    CHECK(exp_rel < 2e-7);
    CHECK(tanh_abs < 2e-7);
}
