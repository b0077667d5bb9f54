// The CUDA backend against the CPU backend, op by op (fp32 to ~1e-5 relative, bf16 to bf16 rounding), and a few
// steps of training on each. Every test starts by looking for a GPU and, without one, ends as skipped (ctest says
// so, with the reason): CI has the toolkit but no GPU, so these run only on a GPU machine.
#include <cmath>
#include <memory>
#include <tuple>

#include "../unit/test_util.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/train/trainer.h"

using namespace us;
using namespace us::test;

namespace {

bool have_gpu() {
    std::string why;
    if (cuda_device_available(&why)) return true;
    skip_test("[cuda] needs a GPU: " + why);
    return false;
}

// One tensor on both backends with the same values.
struct Twin {
    Allocation cpu_mem, gpu_mem;
    Tensor cpu, gpu;
};

class Pair {
public:
    Pair() : m_cpu(2), m_gpu(make_cuda_backend(BackendOptions{"cuda", 0, 0})) {}
    CpuBackend& cpu() { return m_cpu; }
    Backend& gpu() { return *m_gpu; }

    Twin make(DType t, const std::vector<float>& values) {
        Twin w;
        const int64_t n = int64_t(values.size());
        w.cpu_mem = m_cpu.allocator().allocate(size_t(n) * dtype_size(t), MemCategory::temporaries, "test");
        w.gpu_mem = m_gpu->allocator().allocate(size_t(n) * dtype_size(t), MemCategory::temporaries, "test");
        w.cpu = w.cpu_mem.view(t, 0, n);
        w.gpu = w.gpu_mem.view(t, 0, n);
        if (t == DType::f32) {
            std::copy(values.begin(), values.end(), w.cpu.f32());
        } else if (t == DType::bf16) {
            for (int64_t i = 0; i < n; ++i) w.cpu.b16()[i] = f32_to_bf16(values[size_t(i)]);
        } else {
            for (int64_t i = 0; i < n; ++i) w.cpu.i32()[i] = int32_t(values[size_t(i)]);
        }
        m_gpu->upload(w.gpu, w.cpu.data);
        return w;
    }
    Twin zeros(DType t, int64_t n) { return make(t, std::vector<float>(size_t(n), 0.0f)); }

    // Both sides' values as floats.
    std::pair<std::vector<float>, std::vector<float>> read(const Twin& w) {
        std::vector<char> bytes(w.gpu.bytes());
        m_gpu->download(bytes.data(), w.gpu);
        const Tensor g = Tensor::of(bytes.data(), w.gpu.dtype, w.gpu.numel);
        return {to_floats(w.cpu), to_floats(g)};
    }

private:
    static std::vector<float> to_floats(const Tensor& t) {
        std::vector<float> v(size_t(t.numel));
        for (int64_t i = 0; i < t.numel; ++i)
            v[size_t(i)] = t.dtype == DType::f32    ? t.f32()[i]
                           : t.dtype == DType::bf16 ? bf16_to_f32(t.b16()[i])
                                                    : float(t.i32()[i]);
        return v;
    }
    CpuBackend m_cpu;
    std::unique_ptr<Backend> m_gpu;
};

double tolerance(DType t) { return t == DType::bf16 ? 2e-2 : 2e-5; }

void expect_close(Pair& p, const Twin& w, const char* what, double tol) {
    auto [want, got] = p.read(w);
    double scale = 1e-6;
    for (float v : want) scale = std::max(scale, double(std::abs(v)));
    int bad = 0;
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        const double err = std::abs(double(want[i]) - got[i]) / (std::abs(double(want[i])) + scale);
        worst = std::max(worst, err);
        bad += err > tol;
    }
    INFO(what << ": worst relative error " << worst << " (tolerance " << tol << "), " << bad << " of " << want.size()
              << " elements over");
    CHECK(bad == 0);
}

}  // namespace

TEST_CASE("cuda: GEMM in every transpose combination, fp32 and bf16", "[cuda]") {
    if (!have_gpu()) return;
    Pair p;
    for (DType t : {DType::f32, DType::bf16})
        for (bool ta : {false, true})
            for (bool tb : {false, true}) {
                const int m = 37, n = 53, k = 71;
                Twin a = p.make(t, random_vector(size_t(m) * k, 1)), b = p.make(t, random_vector(size_t(k) * n, 2));
                Twin c = p.make(t == DType::bf16 ? DType::bf16 : DType::f32, random_vector(size_t(m) * n, 3));
                GemmArgs g;
                g.trans_a = ta, g.trans_b = tb, g.m = m, g.n = n, g.k = k, g.alpha = 0.5f, g.beta = 1.0f;
                g.lda = ta ? m : k, g.ldb = tb ? k : n, g.ldc = n;
                for (auto [be, side] : {std::pair<Backend*, int>{&p.cpu(), 0}, {&p.gpu(), 1}}) {
                    g.a = side ? a.gpu : a.cpu, g.b = side ? b.gpu : b.cpu, g.c = side ? c.gpu : c.cpu;
                    be->gemm(g);
                }
                INFO(dtype_name(t) << " trans_a " << ta << " trans_b " << tb);
                expect_close(p, c, "C", t == DType::bf16 ? 2e-2 : 1e-4);
            }
}

// A linear layer's forward: out = x W^T + residual + bias. bf16 takes one cuBLASLt GEMM with the bias in its
// epilogue and the residual as its C operand (lt_linear.h); fp32 the GEMM and the bias kernel. Shapes with and
// without 16-byte rows, with and without each optional operand.
TEST_CASE("cuda: linear layer forward (bias and residual in the GEMM) matches the CPU backend", "[cuda]") {
    if (!have_gpu()) return;
    Pair p;
    for (auto [N, IC, OC] : {std::tuple{64, 96, 128}, std::tuple{37, 71, 53}})
        for (DType t : {DType::f32, DType::bf16})
            for (int with : {0, 1, 2, 3}) {  // bit 0: residual, bit 1: bias
                INFO(dtype_name(t) << ", N " << N << " IC " << IC << " OC " << OC << ", residual " << (with & 1)
                                   << ", bias " << (with >> 1));
                Twin x = p.make(t, random_vector(size_t(N) * IC, 41)),
                     w = p.make(t, random_vector(size_t(OC) * IC, 42));
                Twin res = p.make(t, random_vector(size_t(N) * OC, 43)), bias = p.make(t, random_vector(OC, 44));
                Twin out = p.make(t, random_vector(size_t(N) * OC, 45));  // overwritten, whatever it held
                GemmArgs g;
                g.trans_b = true, g.m = N, g.n = OC, g.k = IC, g.lda = IC, g.ldb = IC, g.ldc = OC;
                for (auto [be, side] : {std::pair<Backend*, int>{&p.cpu(), 0}, {&p.gpu(), 1}}) {
                    g.a = side ? x.gpu : x.cpu, g.b = side ? w.gpu : w.cpu, g.c = side ? out.gpu : out.cpu;
                    const Tensor r = (with & 1) ? (side ? res.gpu : res.cpu) : Tensor{};
                    const Tensor b = (with & 2) ? (side ? bias.gpu : bias.cpu) : Tensor{};
                    be->linear_forward(g, r, b);
                }
                expect_close(p, out, "linear out", t == DType::bf16 ? 2e-2 : 1e-4);
            }
}

TEST_CASE("cuda: the MLP's GeLU in the GEMM epilogues (GELU_AUX_BIAS, DGELU) matches the CPU backend", "[cuda]") {
    if (!have_gpu()) return;
    Pair p;
    REQUIRE(p.gpu().fuses_gelu_epilogues(DType::bf16));
    // 64 x 96 -> 256: aligned, the epilogues run; 37 x 72 -> 56: odd rows, cuBLASLt's call or the fallback
    for (auto [N, IC, OC] : {std::tuple{64, 96, 256}, std::tuple{37, 72, 56}})
        for (bool with_bias : {true, false}) {
            INFO("N " << N << " IC " << IC << " OC " << OC << (with_bias ? ", bias" : ", no bias"));
            const DType t = DType::bf16;
            Twin x = p.make(t, random_vector(size_t(N) * IC, 81)), w = p.make(t, random_vector(size_t(OC) * IC, 82));
            Twin bias = p.make(t, random_vector(OC, 83));
            Twin out = p.zeros(t, int64_t(N) * OC), pre = p.zeros(t, int64_t(N) * OC);
            GemmArgs g;
            g.trans_b = true, g.m = N, g.n = OC, g.k = IC, g.lda = IC, g.ldb = IC, g.ldc = OC;
            for (auto [be, side] : {std::pair<Backend*, int>{&p.cpu(), 0}, {&p.gpu(), 1}}) {
                g.a = side ? x.gpu : x.cpu, g.b = side ? w.gpu : w.cpu, g.c = side ? out.gpu : out.cpu;
                be->linear_gelu_forward(g, with_bias ? (side ? bias.gpu : bias.cpu) : Tensor{},
                                        side ? pre.gpu : pre.cpu);
            }
            expect_close(p, pre, "pre-activation (aux)", 2e-2);
            expect_close(p, out, "gelu output", 3e-2);
            // backward: din (N,IC) = gelu'(pre) * (dout (N,OC) @ W (OC,IC)), here with pre of shape (N,IC)
            Twin dout = p.make(t, random_vector(size_t(N) * OC, 84)),
                 pre2 = p.make(t, random_vector(size_t(N) * IC, 85));
            Twin din = p.zeros(t, int64_t(N) * IC);
            GemmArgs gi;
            gi.m = N, gi.n = IC, gi.k = OC, gi.lda = OC, gi.ldb = IC, gi.ldc = IC;
            for (auto [be, side] : {std::pair<Backend*, int>{&p.cpu(), 0}, {&p.gpu(), 1}}) {
                gi.a = side ? dout.gpu : dout.cpu, gi.b = side ? w.gpu : w.cpu, gi.c = side ? din.gpu : din.cpu;
                be->linear_dgelu_backward(gi, side ? pre2.gpu : pre2.cpu);
            }
            expect_close(p, din, "input gradient through the GeLU", 3e-2);
        }
}

TEST_CASE("cuda: LayerNorm, GeLU, bias and elementwise ops match the CPU backend", "[cuda]") {
    if (!have_gpu()) return;
    Pair p;
    // 96 x 80: every kernel takes its 16-byte vector path; 95 x 77: the element-at-a-time path.
    for (auto [N, C] : {std::pair{96, 80}, std::pair{95, 77}})
        for (DType t : {DType::f32, DType::bf16}) {
            INFO(dtype_name(t) << ", " << N << " x " << C);
            Twin x = p.make(t, random_vector(size_t(N) * C, 4)), w = p.make(t, random_vector(C, 5, 0.5f));
            Twin b = p.make(t, random_vector(C, 6)), y = p.zeros(t, int64_t(N) * C);
            Twin mean = p.zeros(DType::f32, N), rstd = p.zeros(DType::f32, N);
            p.cpu().layernorm_forward(y.cpu, mean.cpu, rstd.cpu, x.cpu, w.cpu, b.cpu, N, C);
            p.gpu().layernorm_forward(y.gpu, mean.gpu, rstd.gpu, x.gpu, w.gpu, b.gpu, N, C);
            expect_close(p, y, "layernorm out", tolerance(t));
            expect_close(p, rstd, "layernorm rstd", 1e-5);
            Twin dy = p.make(t, random_vector(size_t(N) * C, 7)), dx = p.make(t, random_vector(size_t(N) * C, 8));
            Twin dw = p.make(t, random_vector(C, 9)), db = p.make(t, random_vector(C, 10));
            p.cpu().layernorm_backward(dx.cpu, dw.cpu, db.cpu, dy.cpu, x.cpu, w.cpu, mean.cpu, rstd.cpu, N, C);
            p.gpu().layernorm_backward(dx.gpu, dw.gpu, db.gpu, dy.gpu, x.gpu, w.gpu, mean.gpu, rstd.gpu, N, C);
            expect_close(p, dx, "layernorm dinp", tolerance(t));
            expect_close(p, dw, "layernorm dweight", tolerance(t) * 5);
            expect_close(p, db, "layernorm dbias", tolerance(t) * 5);

            Twin g = p.zeros(t, int64_t(N) * C), dg = p.zeros(t, int64_t(N) * C);
            p.cpu().gelu_forward(g.cpu, x.cpu), p.gpu().gelu_forward(g.gpu, x.gpu);
            expect_close(p, g, "gelu", tolerance(t) * 5);  // the CPU's vectorised tanh differs by a few ulp
            p.cpu().gelu_backward(dg.cpu, x.cpu, dy.cpu), p.gpu().gelu_backward(dg.gpu, x.gpu, dy.gpu);
            expect_close(p, dg, "gelu backward", tolerance(t) * 5);

            Twin out = p.make(t, random_vector(size_t(N) * C, 11)), bias = p.make(t, random_vector(C, 12));
            p.cpu().add_bias(out.cpu, bias.cpu, N, C), p.gpu().add_bias(out.gpu, bias.gpu, N, C);
            expect_close(p, out, "add_bias", tolerance(t));
            Twin dbias = p.make(t, random_vector(C, 13));
            p.cpu().bias_backward(dbias.cpu, dy.cpu, N, C), p.gpu().bias_backward(dbias.gpu, dy.gpu, N, C);
            expect_close(p, dbias, "bias_backward", tolerance(t) * 5);

            Twin r = p.zeros(t, int64_t(N) * C);
            p.cpu().residual_forward(r.cpu, x.cpu, dy.cpu), p.gpu().residual_forward(r.gpu, x.gpu, dy.gpu);
            expect_close(p, r, "residual", tolerance(t));
            p.cpu().accumulate(r.cpu, x.cpu), p.gpu().accumulate(r.gpu, x.gpu);
            p.cpu().scale(r.cpu, 0.37f), p.gpu().scale(r.gpu, 0.37f);
            expect_close(p, r, "accumulate then scale", tolerance(t));
            Twin converted = p.zeros(t == DType::f32 ? DType::bf16 : DType::f32, int64_t(N) * C);
            p.cpu().copy(converted.cpu, x.cpu), p.gpu().copy(converted.gpu, x.gpu);
            expect_close(p, converted, "copy with conversion", 0.0);  // rounding to nearest-even is exact on both
            CHECK(p.gpu().sum(x.gpu) == Approx(p.cpu().sum(x.cpu)).epsilon(1e-9));
            CHECK(p.gpu().sum_squares(x.gpu) == Approx(p.cpu().sum_squares(x.cpu)).epsilon(1e-9));
            p.gpu().sum_deferred(x.gpu), p.gpu().sum_deferred(dy.gpu);  // added on the device, read once
            p.cpu().sum_deferred(x.cpu), p.cpu().sum_deferred(dy.cpu);
            CHECK(p.gpu().take_deferred_sum() == Approx(p.cpu().take_deferred_sum()).epsilon(1e-9));
            CHECK(p.gpu().take_deferred_sum() == 0.0);  // taking it starts a new total
            p.gpu().fill_zero(x.gpu);
            CHECK(p.gpu().sum_squares(x.gpu) == 0.0);
        }
}

TEST_CASE("cuda: RoPE and causal attention, with saved and recomputed probabilities", "[cuda]") {
    if (!have_gpu()) return;
    Pair p;
    for (DType t : {DType::f32, DType::bf16})
        for (bool keep_probs : {true, false}) {
            INFO(dtype_name(t) << (keep_probs ? ", probabilities kept" : ", probabilities recomputed"));
            const int B = 3, T = 40, NH = 4, HD = 16, C = NH * HD;
            Twin qkv = p.make(t, random_vector(size_t(B) * T * 3 * C, 20));
            p.cpu().rope_forward(qkv.cpu, B, T, NH, HD, Tensor{}),
                p.gpu().rope_forward(qkv.gpu, B, T, NH, HD, Tensor{});
            expect_close(p, qkv, "rope", tolerance(t));
            Twin out = p.zeros(t, int64_t(B) * T * C);
            Twin probs = p.zeros(t, keep_probs ? int64_t(B) * NH * T * T : 0);
            const Tensor pc = keep_probs ? probs.cpu : Tensor{}, pg = keep_probs ? probs.gpu : Tensor{};
            p.cpu().attention_forward(out.cpu, pc, qkv.cpu, B, T, NH, HD);
            p.gpu().attention_forward(out.gpu, pg, qkv.gpu, B, T, NH, HD);
            expect_close(p, out, "attention out", tolerance(t) * 5);
            Twin dout = p.make(t, random_vector(size_t(B) * T * C, 21)), dqkv = p.zeros(t, int64_t(B) * T * 3 * C);
            p.cpu().attention_backward(dqkv.cpu, dout.cpu, qkv.cpu, pc, B, T, NH, HD);
            p.gpu().attention_backward(dqkv.gpu, dout.gpu, qkv.gpu, pg, B, T, NH, HD);
            expect_close(p, dqkv, "attention dqkv", tolerance(t) * 10);
            p.cpu().rope_backward(dqkv.cpu, B, T, NH, HD, Tensor{}),
                p.gpu().rope_backward(dqkv.gpu, B, T, NH, HD, Tensor{});
            expect_close(p, dqkv, "rope backward", tolerance(t) * 10);
        }
}

TEST_CASE("cuda: blockwise attention (ring attention, --attention flash) matches the CPU backend", "[cuda]") {
    if (!have_gpu()) return;
    Pair p;
    // bf16 with head dim 64 runs on the tensor-core tiles, the rest on the plain loops; one causal chunk (flash on
    // one rank) and a ring-like set of pairs over two chunks.
    const std::vector<AttentionChunkPair> whole = {{0, 0, true}};
    const std::vector<AttentionChunkPair> ring = {{0, 0, true}, {1, 0, false}, {1, 1, true}};
    for (DType t : {DType::f32, DType::bf16})
        for (int HD : {64, 16})
            for (const auto* pairs : {&whole, &ring}) {
                const int B = 2, T = 128, NH = 2, C = NH * HD, chunk = pairs == &whole ? T : T / 2;
                INFO(dtype_name(t) << ", head dim " << HD << (pairs == &whole ? ", one chunk" : ", two chunks"));
                Twin qkv = p.make(t, random_vector(size_t(B) * T * 3 * C, 50));
                Twin kv = p.zeros(t, int64_t(B) * T * 2 * C);
                p.cpu().attention_block_pack_kv(kv.cpu, qkv.cpu, B, T, C);
                p.gpu().attention_block_pack_kv(kv.gpu, qkv.gpu, B, T, C);
                expect_close(p, kv, "packed keys and values", 0.0);
                const int64_t rows = int64_t(B) * NH * T;
                Twin acc = p.zeros(DType::f32, int64_t(B) * T * C), mx = p.zeros(DType::f32, rows);
                Twin sum = p.zeros(DType::f32, rows);
                for (auto [be, side] : {std::pair<Backend*, int>{&p.cpu(), 0}, {&p.gpu(), 1}}) {
                    AttentionBlockArgs a{
                        side ? qkv.gpu : qkv.cpu, side ? kv.gpu : kv.cpu, B, T, NH, HD, chunk, pairs->data(),
                        int(pairs->size())};
                    be->attention_block_forward(a, side ? acc.gpu : acc.cpu, side ? mx.gpu : mx.cpu,
                                                side ? sum.gpu : sum.cpu);
                }
                const double tol = t == DType::bf16 ? 5e-2 : 1e-4;
                Twin out = p.zeros(t, int64_t(B) * T * C), lse = p.zeros(DType::f32, rows);
                p.cpu().attention_block_finish(out.cpu, lse.cpu, acc.cpu, mx.cpu, sum.cpu, B, T, NH, HD);
                p.gpu().attention_block_finish(out.gpu, lse.gpu, acc.gpu, mx.gpu, sum.gpu, B, T, NH, HD);
                expect_close(p, out, "blockwise attention out", tol);
                expect_close(p, lse, "log-sum-exp", 1e-3);
                Twin dout = p.make(t, random_vector(size_t(B) * T * C, 51)), delta = p.zeros(DType::f32, rows);
                Twin dq = p.zeros(DType::f32, int64_t(B) * T * C), dkv = p.zeros(DType::f32, int64_t(B) * T * 2 * C);
                for (auto [be, side] : {std::pair<Backend*, int>{&p.cpu(), 0}, {&p.gpu(), 1}}) {
                    // each side from its own out (compared above)
                    be->attention_block_delta(side ? delta.gpu : delta.cpu, side ? dout.gpu : dout.cpu,
                                              side ? out.gpu : out.cpu, B, T, NH, HD);
                }
                expect_close(p, delta, "delta", tol);
                for (auto [be, side] : {std::pair<Backend*, int>{&p.cpu(), 0}, {&p.gpu(), 1}}) {
                    AttentionBlockArgs a{
                        side ? qkv.gpu : qkv.cpu, side ? kv.gpu : kv.cpu, B, T, NH, HD, chunk, pairs->data(),
                        int(pairs->size())};
                    be->attention_block_backward(a, side ? dq.gpu : dq.cpu, side ? dkv.gpu : dkv.cpu,
                                                 side ? dout.gpu : dout.cpu, side ? lse.gpu : lse.cpu,
                                                 side ? delta.gpu : delta.cpu);
                }
                expect_close(p, dq, "dq", tol);
                expect_close(p, dkv, "dk and dv", tol);
                if (pairs != &whole) continue;
                // one rank (--attention flash): k and v read in qkv, rows 3C apart, give the packed block's results
                Twin acc2 = p.zeros(DType::f32, int64_t(B) * T * C), mx2 = p.zeros(DType::f32, rows);
                Twin sum2 = p.zeros(DType::f32, rows), dq2 = p.zeros(DType::f32, int64_t(B) * T * C);
                Twin dkv2 = p.zeros(DType::f32, int64_t(B) * T * 2 * C);
                AttentionBlockArgs in_place{qkv.gpu,
                                            qkv.gpu.slice(C, qkv.gpu.numel - C),
                                            B,
                                            T,
                                            NH,
                                            HD,
                                            chunk,
                                            pairs->data(),
                                            int(pairs->size()),
                                            3 * C};
                p.gpu().attention_block_forward(in_place, acc2.gpu, mx2.gpu, sum2.gpu);
                p.gpu().attention_block_backward(in_place, dq2.gpu, dkv2.gpu, dout.gpu, lse.gpu, delta.gpu);
                for (auto [mine, packed, what] :
                     {std::tuple{&acc2, &acc, "accumulator"}, {&dq2, &dq, "dq"}, {&dkv2, &dkv, "dk, dv"}}) {
                    INFO("k and v in qkv: " << what);
                    CHECK(p.read(*mine).second == p.read(*packed).second);  // the same kernels on the same values
                }
            }
}

TEST_CASE("cuda: whole-sequence flash attention (fused tiles) equals the blockwise composition", "[cuda]") {
    if (!have_gpu()) return;
    Pair p;
    // One rank's --attention flash: the fused kernels write out, lse and dqkv themselves; Backend's composition
    // (blockwise ops, fp32 state, finish, delta, store) is the reference on the same GPU, the CPU the other.
    for (int T : {128, 256}) {
        const int B = 2, NH = 3, HD = 64, C = NH * HD;
        INFO("T " << T);
        const std::vector<AttentionChunkPair> pairs = {{0, 0, true}};
        Twin qkv = p.make(DType::bf16, random_vector(size_t(B) * T * 3 * C, 60));
        Twin dout = p.make(DType::bf16, random_vector(size_t(B) * T * C, 61));
        const int64_t rows = int64_t(B) * NH * T;
        Twin out = p.zeros(DType::bf16, int64_t(B) * T * C), lse = p.zeros(DType::f32, rows);
        Twin ref_out = p.zeros(DType::bf16, int64_t(B) * T * C), ref_lse = p.zeros(DType::f32, rows);
        auto args = [&](Tensor q) {
            return AttentionBlockArgs{q, q.slice(C, q.numel - C), B, T, NH, HD, T, pairs.data(), 1, 3 * C};
        };
        REQUIRE(p.gpu().fuses_whole_attention(args(qkv.gpu)));
        CHECK_FALSE(p.cpu().fuses_whole_attention(args(qkv.cpu)));
        p.gpu().attention_whole_forward(args(qkv.gpu), out.gpu, lse.gpu);
        p.gpu().Backend::attention_whole_forward(args(qkv.gpu), ref_out.gpu, ref_lse.gpu);
        p.cpu().attention_whole_forward(args(qkv.cpu), out.cpu, lse.cpu);
        CHECK(p.read(out).second == p.read(ref_out).second);  // the finish kernel's arithmetic, in the tile kernel
        CHECK(p.read(lse).second == p.read(ref_lse).second);
        expect_close(p, out, "fused out against the CPU", 5e-2);
        expect_close(p, lse, "fused lse against the CPU", 1e-3);
        Twin dqkv = p.zeros(DType::bf16, int64_t(B) * T * 3 * C),
             ref_dqkv = p.zeros(DType::bf16, int64_t(B) * T * 3 * C);
        p.gpu().attention_whole_backward(args(qkv.gpu), dqkv.gpu, dout.gpu, out.gpu, lse.gpu);
        p.gpu().Backend::attention_whole_backward(args(qkv.gpu), ref_dqkv.gpu, dout.gpu, ref_out.gpu, ref_lse.gpu);
        p.cpu().attention_whole_backward(args(qkv.cpu), dqkv.cpu, dout.cpu, out.cpu, lse.cpu);
        // the deltas are summed in another order (two threads a row in the dq kernel): equal to bf16 rounding
        const auto [cpu_grads, fused] = p.read(dqkv);
        const auto reference = p.read(ref_dqkv).second;
        double worst = 0, scale = 1e-6;
        for (float v : reference) scale = std::max(scale, double(std::abs(v)));
        for (size_t i = 0; i < fused.size(); ++i)
            worst =
                std::max(worst, std::abs(double(fused[i]) - reference[i]) / (std::abs(double(reference[i])) + scale));
        INFO("fused dqkv against the composition: worst relative error " << worst);
        CHECK(worst < 1e-2);
        expect_close(p, dqkv, "fused dqkv against the CPU", 5e-2);
    }
}

TEST_CASE("cuda: fused bf16 cross-entropy matches the CPU backend on every launch shape", "[cuda]") {
    if (!have_gpu()) return;
    Pair p;
    Rng rng(70);
    // 97: not whole 16-byte vectors (the three-pass kernel); 104: one warp; 2000: 256 threads, one vector each;
    // 50304 (GPT-2's padded vocabulary): 1024 threads, 7 vectors each in registers.
    for (int V : {97, 104, 2000, 50304}) {
        const int N = V > 10000 ? 48 : 200;
        INFO("vocabulary " << V);
        std::vector<float> targets(static_cast<size_t>(N));
        for (auto& t : targets) t = float(rng.next_below(uint64_t(V)));
        Twin tgt = p.make(DType::i32, targets);
        Twin logits = p.make(DType::bf16, random_vector(size_t(N) * V, uint64_t(71 + V), 4.0f));
        Twin losses = p.zeros(DType::f32, N);
        p.cpu().crossentropy_fused(losses.cpu, logits.cpu, tgt.cpu, N, V);
        p.gpu().crossentropy_fused(losses.gpu, logits.gpu, tgt.gpu, N, V);
        expect_close(p, losses, "fused losses", 1e-4);
        // probs - onehot in bf16: compare at the scale of the row (the -1 of the target dominates)
        const auto [want, got] = p.read(logits);
        int bad = 0;
        for (size_t i = 0; i < want.size(); ++i)
            bad += std::abs(double(want[i]) - got[i]) > 1e-2 * (std::abs(want[i]) + 1e-3);
        CHECK(bad == 0);
    }
}

TEST_CASE("cuda: embedding (bitwise backward), cross-entropy and AdamW match the CPU backend", "[cuda]") {
    if (!have_gpu()) return;
    Pair p;
    const int N = 300, C = 48, V = 97;
    std::vector<float> tokens(N);
    Rng rng(30);
    for (auto& v : tokens) v = float(rng.next_below(20));  // few distinct tokens: many repeats to add up
    Twin tok = p.make(DType::i32, tokens);
    for (DType t : {DType::f32, DType::bf16}) {
        INFO(dtype_name(t));
        Twin wte = p.make(t, random_vector(size_t(V) * C, 31)), out = p.zeros(t, int64_t(N) * C);
        p.cpu().embedding_forward(out.cpu, tok.cpu, wte.cpu, N, C, 0, V);
        p.gpu().embedding_forward(out.gpu, tok.gpu, wte.gpu, N, C, 0, V);
        expect_close(p, out, "embedding", 0.0);
        Twin dout = p.make(t, random_vector(size_t(N) * C, 32)), dwte = p.make(t, random_vector(size_t(V) * C, 33));
        p.cpu().embedding_backward(dwte.cpu, dout.cpu, tok.cpu, N, C, 0, V);
        p.gpu().embedding_backward(dwte.gpu, dout.gpu, tok.gpu, N, C, 0, V);
        expect_close(p, dwte, "embedding backward (same order of additions)", 0.0);
        {  // a byte tokenizer's batch: one token a third of it, runs longer than the kernel's eight-row prefetch,
           // columns over several column blocks and a partial one
            const int N2 = 900, C2 = 300;
            std::vector<float> skewed(N2);
            for (auto& v : skewed) v = rng.next_below(3) == 0 ? 7.0f : float(rng.next_below(20));
            Twin tok2 = p.make(DType::i32, skewed);
            Twin dout2 = p.make(t, random_vector(size_t(N2) * C2, 38)),
                 dwte2 = p.make(t, random_vector(size_t(V) * C2, 39));
            p.cpu().embedding_backward(dwte2.cpu, dout2.cpu, tok2.cpu, N2, C2, 0, V);
            p.gpu().embedding_backward(dwte2.gpu, dout2.gpu, tok2.gpu, N2, C2, 0, V);
            expect_close(p, dwte2, "embedding backward, one frequent token", 0.0);
        }
        // a vocabulary-parallel slice: rows [5, 12) of the vocabulary; other tokens embed to zeros
        Twin slice = p.make(t, random_vector(size_t(7) * C, 35)), sliced_out = p.zeros(t, int64_t(N) * C);
        p.cpu().embedding_forward(sliced_out.cpu, tok.cpu, slice.cpu, N, C, 5, 7);
        p.gpu().embedding_forward(sliced_out.gpu, tok.gpu, slice.gpu, N, C, 5, 7);
        expect_close(p, sliced_out, "embedding of a vocabulary slice", 0.0);
        p.cpu().embedding_backward(slice.cpu, dout.cpu, tok.cpu, N, C, 5, 7);
        p.gpu().embedding_backward(slice.gpu, dout.gpu, tok.gpu, N, C, 5, 7);
        expect_close(p, slice, "embedding backward of a vocabulary slice", 0.0);
    }
    // Softmax cross-entropy on a vocabulary of 97 (the kernels' scalar path) and of 104 (their 16-byte path: 4 floats,
    // 8 bf16).
    auto check_crossentropy = [&](int vocab, const Twin& targets, uint64_t seed, const std::string& path) {
        Twin logits = p.make(DType::f32, random_vector(size_t(N) * vocab, seed, 3.0f)), losses = p.zeros(DType::f32, N);
        p.cpu().crossentropy_forward(losses.cpu, logits.cpu, targets.cpu, N, vocab);
        p.gpu().crossentropy_forward(losses.gpu, logits.gpu, targets.gpu, N, vocab);
        expect_close(p, losses, ("cross-entropy losses" + path).c_str(), 1e-5);
        expect_close(p, logits, ("probabilities" + path).c_str(), 1e-5);
        Twin d16 = p.zeros(DType::bf16, int64_t(N) * vocab);  // bf16 runs: the gradient written in bf16 directly
        p.cpu().crossentropy_backward(d16.cpu, logits.cpu, targets.cpu, 0.01f, N, vocab, 0);
        p.gpu().crossentropy_backward(d16.gpu, logits.gpu, targets.gpu, 0.01f, N, vocab, 0);
        expect_close(p, d16, ("dlogits in bf16" + path).c_str(), 1e-2);
        p.cpu().crossentropy_backward(logits.cpu, logits.cpu, targets.cpu, 0.01f, N, vocab, 0);
        p.gpu().crossentropy_backward(logits.gpu, logits.gpu, targets.gpu, 0.01f, N, vocab, 0);
        expect_close(p, logits, ("dlogits" + path).c_str(), 1e-5);
    };
    auto draw_targets = [&](int vocab) {
        std::vector<float> t(N);
        for (auto& v : t) v = float(rng.next_below(vocab));
        return p.make(DType::i32, t);
    };
    const Twin tgt = draw_targets(V);
    check_crossentropy(V, tgt, 34, "");
    check_crossentropy(104, draw_targets(104), 37, " (16-byte path)");
    // The vocabulary-parallel steps on one rank's columns [3, 3 + V2) of which the last 2 are padding (the
    // reductions over the group are the caller's; here each step alone, CPU against GPU).
    const int V2 = 7, valid = 5, begin = 3;
    Twin part = p.make(DType::f32, random_vector(size_t(N) * V2, 36, 3.0f)), rowmax = p.zeros(DType::f32, N);
    Twin sums = p.zeros(DType::f32, 2 * int64_t(N)), part_losses = p.zeros(DType::f32, N);
    p.cpu().crossentropy_local_max(rowmax.cpu, part.cpu, N, V2, valid);
    p.gpu().crossentropy_local_max(rowmax.gpu, part.gpu, N, V2, valid);
    expect_close(p, rowmax, "vocab-parallel max", 0.0);
    p.cpu().crossentropy_local_sums(sums.cpu, part.cpu, rowmax.cpu, tgt.cpu, N, V2, valid, begin);
    p.gpu().crossentropy_local_sums(sums.gpu, part.gpu, rowmax.gpu, tgt.gpu, N, V2, valid, begin);
    expect_close(p, sums, "vocab-parallel sums", 1e-5);
    p.cpu().crossentropy_finish(part_losses.cpu, part.cpu, rowmax.cpu, sums.cpu, N, V2, valid);
    p.gpu().crossentropy_finish(part_losses.gpu, part.gpu, rowmax.gpu, sums.gpu, N, V2, valid);
    expect_close(p, part_losses, "vocab-parallel losses", 1e-5);
    expect_close(p, part, "vocab-parallel probabilities", 1e-5);
    p.cpu().crossentropy_backward(part.cpu, part.cpu, tgt.cpu, 0.01f, N, V2, begin);
    p.gpu().crossentropy_backward(part.gpu, part.gpu, tgt.gpu, 0.01f, N, V2, begin);
    expect_close(p, part, "vocab-parallel dlogits", 1e-5);

    for (bool master : {false, true}) {
        INFO((master ? "bf16 params with fp32 master weights" : "fp32 params"));
        const int n = 1000;
        Twin params = p.make(master ? DType::bf16 : DType::f32, random_vector(n, 40));
        Twin w32 = p.make(DType::f32, random_vector(n, 40));
        Twin grads = p.make(master ? DType::bf16 : DType::f32, random_vector(n, 41));
        Twin m = p.make(DType::f32, random_vector(n, 42, 0.1f)), v = p.zeros(DType::f32, n);
        for (int step = 1; step <= 3; ++step)
            for (auto [be, side] : {std::pair<Backend*, int>{&p.cpu(), 0}, {&p.gpu(), 1}}) {
                AdamWArgs a;
                a.params = side ? params.gpu : params.cpu;
                a.master = master ? (side ? w32.gpu : w32.cpu) : Tensor{};
                a.grads = side ? grads.gpu : grads.cpu;
                a.m = side ? m.gpu : m.cpu, a.v = side ? v.gpu : v.cpu;
                a.lr = 1e-2, a.weight_decay = 0.1, a.grad_scale = 0.5f, a.step = step;
                be->adamw(a);
            }
        expect_close(p, master ? w32 : params, "AdamW weights", 1e-6);
        expect_close(p, v, "AdamW second moment", 1e-6);
    }
}

TEST_CASE("cuda: training on the GPU follows the CPU's losses (fp32 closely, bf16 within its rounding)", "[cuda]") {
    if (!have_gpu()) return;
    for (Precision precision : {Precision::fp32, Precision::bf16}) {
        TrainConfig c;
        c.model.vocab = 256, c.model.hidden = 64, c.model.layers = 2, c.model.heads = 4, c.model.seq = 32;
        c.batch = 4, c.grad_accum = 2, c.steps = 5, c.warmup = 1, c.quiet = true;
        c.precision = precision;
        c.data = sample_data_file("cuda-data.txt", 40000);
        if (precision == Precision::bf16) {  // --attention flash on one rank with head dim 64: the fused tiles
            c.model.hidden = 128, c.model.heads = 2, c.model.seq = 64;
            c.attention = Attention::flash;
        }
        CpuBackend cpu(2);
        auto gpu = make_cuda_backend(BackendOptions{"cuda", 0, 0});
        Trainer on_cpu(c, cpu), on_gpu(c, *gpu);
        for (int s = 0; s < c.steps; ++s) {
            const double want = on_cpu.train_step().loss, got = on_gpu.train_step().loss;
            INFO((precision == Precision::bf16 ? "bf16" : "fp32") << " step " << s + 1);
            CHECK(got == Approx(want).epsilon(precision == Precision::bf16 ? 2e-2 : 1e-4));
        }
    }
}
