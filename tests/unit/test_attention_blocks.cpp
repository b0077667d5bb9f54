// The blockwise attention ops that ring attention (context parallelism) is made of, on the CPU backend: the online
// softmax merge of key blocks against one softmax over all the visible keys (fp32, 1e-6, computed in double here),
// in any order and with ring steps that contribute nothing; the backward against finite differences; one causal
// block against the attention op; RoPE at given positions; and the zigzag layout's balance.
#include <cmath>
#include <numeric>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/model/context_parallel.h"
#include "test_util.h"

using namespace us;
using namespace us::test;

namespace {

CpuBackend& backend() {
    static CpuBackend be(2);
    return be;
}

// A sequence of S = 4 chunks of c rows; the queries are this rank's chunks 1 and 2 (local rows [0, c) and
// [c, 2c)), the keys come in two blocks: block A holds global chunks 0 and 3, block B chunks 1 and 2 (the rank's
// own). B = 2 sequences, NH = 2 heads of HD = 8. Chunks of 3 rows fit in one of the kernel's 64-row query blocks
// and 128-key backward blocks; chunks of 140 take three query blocks and two key blocks, the last ones partial,
// with the causal pairs' key range cut at each block's last row.
template <int kChunk>
struct SetupOf {
    static constexpr int B = 2, NH = 2, HD = 8, C = NH * HD, c = kChunk, T = 2 * c;  // T: local rows
    std::vector<float> qkv = random_vector(B * T * 3 * C, 101);
    std::vector<float> block_a = random_vector(B * T * 2 * C, 102), block_b;
    SetupOf() {
        block_b.resize(size_t(B) * T * 2 * C);
        backend().attention_block_pack_kv(tensor_of(block_b), tensor_of(qkv), B, T, C);
    }
    // global chunk of local chunk l in each block
    static int query_chunk(int l) { return l == 0 ? 1 : 2; }
    static int a_chunk(int l) { return l == 0 ? 0 : 3; }
    static int b_chunk(int l) { return query_chunk(l); }
    // The pairs a causal rank computes: block A's chunk 0 against both query chunks (chunk 3 is after them both);
    // block B: chunk 1 on the diagonal of query chunk 1 and fully before chunk 2, chunk 2 on chunk 2's diagonal.
    std::vector<AttentionChunkPair> pairs_a = {{0, 0, false}, {1, 0, false}};
    std::vector<AttentionChunkPair> pairs_b = {{0, 0, true}, {1, 0, false}, {1, 1, true}};

    AttentionBlockArgs args(std::vector<float>& kv, const std::vector<AttentionChunkPair>& pairs) {
        return {tensor_of(qkv), tensor_of(kv), B, T, NH, HD, c, pairs.data(), int(pairs.size())};
    }

    // out (B,T,C) by one softmax per query row over every key it sees, in double.
    std::vector<double> reference() const {
        std::vector<double> out(size_t(B) * T * C, 0.0);
        const double scale = 1.0 / std::sqrt(double(HD));
        for (int b = 0; b < B; ++b)
            for (int h = 0; h < NH; ++h)
                for (int t = 0; t < T; ++t) {
                    const int qpos = query_chunk(t / c) * c + t % c;
                    std::vector<double> s, vrows;
                    std::vector<const float*> values;
                    for (int blk = 0; blk < 2; ++blk)
                        for (int r = 0; r < T; ++r) {
                            const int kpos = (blk == 0 ? a_chunk(r / c) : b_chunk(r / c)) * c + r % c;
                            if (kpos > qpos) continue;
                            const std::vector<float>& kv = blk == 0 ? block_a : block_b;
                            const float* k = kv.data() + (size_t(b) * T + r) * 2 * C + h * HD;
                            const float* q = qkv.data() + (size_t(b) * T + t) * 3 * C + h * HD;
                            double d = 0;
                            for (int i = 0; i < HD; ++i) d += double(q[i]) * k[i];
                            s.push_back(d * scale);
                            values.push_back(k + C);
                        }
                    const double m = *std::max_element(s.begin(), s.end());
                    double sum = 0;
                    for (double& x : s) sum += x = std::exp(x - m);
                    for (size_t j = 0; j < s.size(); ++j)
                        for (int i = 0; i < HD; ++i)
                            out[(size_t(b) * T + t) * C + h * HD + i] += s[j] / sum * values[j][i];
                }
        return out;
    }

    // forward over the blocks in the given order (A first or B first), then finish.
    std::vector<float> forward(bool a_first, std::vector<float>* lse_out = nullptr) {
        std::vector<float> acc(size_t(B) * T * C, 0.0f), mx(size_t(B) * NH * T, 0.0f), sm(mx.size(), 0.0f);
        std::vector<float> out(acc.size()), lse(mx.size());
        const std::vector<AttentionChunkPair> none;
        backend().attention_block_forward(args(block_a, none), tensor_of(acc), tensor_of(mx),
                                          tensor_of(sm));  // a ring step with nothing to do
        for (int i = 0; i < 2; ++i) {
            const bool a = (i == 0) == a_first;
            backend().attention_block_forward(a ? args(block_a, pairs_a) : args(block_b, pairs_b), tensor_of(acc),
                                              tensor_of(mx), tensor_of(sm));
        }
        backend().attention_block_finish(tensor_of(out), tensor_of(lse), tensor_of(acc), tensor_of(mx), tensor_of(sm),
                                         B, T, NH, HD);
        if (lse_out) *lse_out = lse;
        return out;
    }
};

using Setup = SetupOf<3>;

double max_abs(const std::vector<float>& got, const std::vector<double>& want) {
    double d = 0;
    for (size_t i = 0; i < got.size(); ++i) d = std::max(d, std::abs(got[i] - want[i]));
    return d;
}

}  // namespace

template <int kChunk>
void check_merge() {
    SetupOf<kChunk> s;
    const std::vector<double> want = s.reference();
    // Rows of query chunk 1 see nothing in block A's chunk 3 and only part of block B: in either order, with an
    // empty ring step first, the merge must land on the one softmax.
    for (bool a_first : {true, false}) {
        INFO("chunk " << kChunk << (a_first ? ", block A first" : ", block B first"));
        CHECK(max_abs(s.forward(a_first), want) < 1e-6);
    }
}

TEST_CASE("the online-softmax merge of key blocks equals one softmax over every visible key", "[cpu][ops][cp]") {
    check_merge<3>();
    check_merge<140>();
}

// One rank's `--attention flash`: one causal pair per sequence, k and v read from qkv in place (kv_stride 3C),
// against the attention op, forward and backward. T = 7 is one query block; T = 150 is three, the last partial
// (and two backward key blocks).
TEST_CASE("one causal block through the blockwise ops equals the attention op", "[cpu][ops][cp]") {
    for (int T : {7, 150}) {
        INFO("T " << T);
        const int B = 2, NH = 3, HD = 4, C = NH * HD;
        auto qkv = random_vector(B * T * 3 * C, 103);
        auto dout = random_vector(B * T * C, 106);
        std::vector<float> acc(size_t(B) * T * C, 0.0f), mx(size_t(B) * NH * T, 0.0f), sm(mx.size(), 0.0f),
            out(acc.size()), lse(mx.size()), want(acc.size()), delta(mx.size()), dq(acc.size(), 0.0f),
            dkv(size_t(B) * T * 2 * C, 0.0f), dqkv(qkv.size()), want_dqkv(qkv.size()), probs(size_t(B) * NH * T * T);
        const AttentionChunkPair pair{0, 0, true};
        const AttentionBlockArgs args{
            tensor_of(qkv), tensor_of(qkv).slice(C, qkv.size() - C), B, T, NH, HD, T, &pair, 1, 3 * C};
        backend().attention_block_forward(args, tensor_of(acc), tensor_of(mx), tensor_of(sm));
        backend().attention_block_finish(tensor_of(out), tensor_of(lse), tensor_of(acc), tensor_of(mx), tensor_of(sm),
                                         B, T, NH, HD);
        backend().attention_forward(tensor_of(want), tensor_of(probs), tensor_of(qkv), B, T, NH, HD);
        for (size_t i = 0; i < out.size(); ++i) CHECK(out[i] == Approx(want[i]).margin(1e-6));

        backend().attention_block_delta(tensor_of(delta), tensor_of(dout), tensor_of(out), B, T, NH, HD);
        backend().attention_block_backward(args, tensor_of(dq), tensor_of(dkv), tensor_of(dout), tensor_of(lse),
                                           tensor_of(delta));
        backend().attention_block_store_grads(tensor_of(dqkv), tensor_of(dq), tensor_of(dkv), B, T, C);
        backend().attention_backward(tensor_of(want_dqkv), tensor_of(dout), tensor_of(qkv), tensor_of(probs), B, T, NH,
                                     HD);
        for (size_t i = 0; i < dqkv.size(); ++i) CHECK(dqkv[i] == Approx(want_dqkv[i]).margin(2e-6));
    }
}

// The bf16 path converts each pair's q, k, v and dO into fp32 tiles (leading dimension HD instead of the activation's
// row stride): over three query blocks it must land on the fp32 op run on the same bf16-rounded values, to bf16's
// rounding of the output and gradients (the gradients' margin is wider: backward's delta = dO . O reads the bf16
// output, an error of about 2^-9 per row that each key's gradient sums over the rows that see it).
TEST_CASE("one causal block in bf16 over several query blocks equals the fp32 op on the rounded values",
          "[cpu][ops][cp]") {
    const int B = 2, NH = 3, HD = 4, C = NH * HD, T = 150;
    auto round_trip = [](std::vector<float> v) {
        for (float& x : v) x = bf16_to_f32(f32_to_bf16(x));
        return v;
    };
    auto to_bf16 = [](const std::vector<float>& v) {
        std::vector<bf16> out(v.size());
        for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16(v[i]);
        return out;
    };
    std::vector<float> qkv = round_trip(random_vector(B * T * 3 * C, 107)),
                       dout = round_trip(random_vector(B * T * C, 108));
    std::vector<bf16> qkv16 = to_bf16(qkv), dout16 = to_bf16(dout), out16(size_t(B) * T * C), dqkv16(qkv.size());
    std::vector<float> acc(size_t(B) * T * C, 0.0f), mx(size_t(B) * NH * T, 0.0f), sm(mx.size(), 0.0f), lse(mx.size()),
        delta(mx.size()), dq(acc.size(), 0.0f), dkv(size_t(B) * T * 2 * C, 0.0f), want(acc.size()),
        probs(size_t(B) * NH * T * T), want_dqkv(qkv.size());
    const Tensor q16 = Tensor::of(qkv16.data(), int64_t(qkv16.size()));
    const AttentionChunkPair pair{0, 0, true};
    const AttentionBlockArgs args{q16, q16.slice(C, q16.numel - C), B, T, NH, HD, T, &pair, 1, 3 * C};
    backend().attention_block_forward(args, tensor_of(acc), tensor_of(mx), tensor_of(sm));
    const Tensor out = Tensor::of(out16.data(), int64_t(out16.size())),
                 dy = Tensor::of(dout16.data(), int64_t(dout16.size()));
    backend().attention_block_finish(out, tensor_of(lse), tensor_of(acc), tensor_of(mx), tensor_of(sm), B, T, NH, HD);
    backend().attention_block_delta(tensor_of(delta), dy, out, B, T, NH, HD);
    backend().attention_block_backward(args, tensor_of(dq), tensor_of(dkv), dy, tensor_of(lse), tensor_of(delta));
    backend().attention_block_store_grads(Tensor::of(dqkv16.data(), int64_t(dqkv16.size())), tensor_of(dq),
                                          tensor_of(dkv), B, T, C);
    backend().attention_forward(tensor_of(want), tensor_of(probs), tensor_of(qkv), B, T, NH, HD);
    backend().attention_backward(tensor_of(want_dqkv), tensor_of(dout), tensor_of(qkv), tensor_of(probs), B, T, NH, HD);
    for (size_t i = 0; i < want.size(); ++i) CHECK(bf16_to_f32(out16[i]) == Approx(want[i]).epsilon(1e-2).margin(2e-3));
    for (size_t i = 0; i < want_dqkv.size(); ++i)
        CHECK(bf16_to_f32(dqkv16[i]) == Approx(want_dqkv[i]).epsilon(2e-2).margin(6e-3));
}

template <int kChunk>
void check_blockwise_backward() {
    INFO("chunk " << kChunk);
    using Setup = SetupOf<kChunk>;
    Setup s;
    const int B = Setup::B, T = Setup::T, NH = Setup::NH, HD = Setup::HD, C = Setup::C;
    auto R = random_vector(B * T * C, 104);
    auto loss = [&] { return dot(s.forward(true), R); };
    std::vector<float> lse;
    std::vector<float> out = s.forward(true, &lse);
    std::vector<float> delta(lse.size()), dq(size_t(B) * T * C, 0.0f), dkv_a(size_t(B) * T * 2 * C, 0.0f),
        dkv_b(dkv_a.size(), 0.0f);
    backend().attention_block_delta(tensor_of(delta), tensor_of(R), tensor_of(out), B, T, NH, HD);
    backend().attention_block_backward(s.args(s.block_a, s.pairs_a), tensor_of(dq), tensor_of(dkv_a), tensor_of(R),
                                       tensor_of(lse), tensor_of(delta));
    backend().attention_block_backward(s.args(s.block_b, s.pairs_b), tensor_of(dq), tensor_of(dkv_b), tensor_of(R),
                                       tensor_of(lse), tensor_of(delta));
    // dq lands in the q columns of qkv; block A's keys and values are inputs of their own.
    // (block B was packed from qkv once: perturbing qkv's own k and v columns changes nothing, their gradient is 0)
    std::vector<float> dqkv(s.qkv.size(), 0.0f), no_kv(dkv_a.size(), 0.0f);
    backend().attention_block_store_grads(tensor_of(dqkv), tensor_of(dq), tensor_of(no_kv), B, T, C);
    check_gradient("dq", s.qkv, dqkv, loss, {.samples = 40});
    check_gradient("dkv (block A)", s.block_a, dkv_a, loss, {.samples = 40});
    check_gradient("dkv (block B)", s.block_b, dkv_b, loss, {.samples = 40});
}

TEST_CASE("blockwise attention backward matches finite differences", "[cpu][ops][cp][gradcheck]") {
    check_blockwise_backward<3>();
    check_blockwise_backward<140>();
}

TEST_CASE("rope at given positions rotates as the rows of a longer sequence", "[cpu][ops][cp]") {
    const int B = 2, T = 8, NH = 2, HD = 4, C = NH * HD;
    auto whole = random_vector(B * T * 3 * C, 105);
    // this rank's rows: positions 2, 3 and 6, 7 (a zigzag layout of 4 chunks of 2)
    const std::vector<int32_t> pos = {2, 3, 6, 7};
    std::vector<float> part(size_t(B) * 4 * 3 * C);
    for (int b = 0; b < B; ++b)
        for (int t = 0; t < 4; ++t)
            std::copy_n(whole.data() + (size_t(b) * T + size_t(pos[size_t(t)])) * 3 * C, 3 * C,
                        part.data() + (size_t(b) * 4 + t) * 3 * C);
    std::vector<int32_t> positions = pos;
    backend().rope_forward(tensor_of(whole), B, T, NH, HD, Tensor{});
    backend().rope_forward(tensor_of(part), B, 4, NH, HD, Tensor::of(positions.data(), 4));
    for (int b = 0; b < B; ++b)
        for (int t = 0; t < 4; ++t)
            for (int i = 0; i < 3 * C; ++i)
                CHECK(part[(size_t(b) * 4 + t) * 3 * C + i] ==
                      whole[(size_t(b) * T + size_t(pos[size_t(t)])) * 3 * C + i]);
}

TEST_CASE("zigzag gives every cp rank the same causal work, contiguous gives the last rank the most", "[cpu][cp]") {
    for (int cp : {2, 4}) {
        // work in chunk-pair units: a full pair 2, a diagonal (causal) one 1
        auto work = [&](CpBalance b, int r) {
            int w = 0;
            for (int owner = 0; owner < cp; ++owner)
                for (const AttentionChunkPair& p : cp_chunk_pairs(b, cp, r, owner)) w += p.causal ? 1 : 2;
            return w;
        };
        std::vector<int> zig, con;
        for (int r = 0; r < cp; ++r)
            zig.push_back(work(CpBalance::zigzag, r)), con.push_back(work(CpBalance::contiguous, r));
        INFO("cp " << cp);
        for (int r = 1; r < cp; ++r) CHECK(zig[size_t(r)] == zig[0]);
        for (int r = 1; r < cp; ++r) CHECK(con[size_t(r)] > con[size_t(r - 1)]);  // rank r sees r + 1 blocks
        // the zigzag rank r holds chunks r and 2cp - 1 - r
        CHECK(cp_global_chunk(CpBalance::zigzag, cp, 0, 1) == 2 * cp - 1);
        // every (query chunk, key chunk) below the diagonal is computed once over the ring, the diagonal ones too
        int pairs = 0;
        for (int r = 0; r < cp; ++r)
            for (int owner = 0; owner < cp; ++owner)
                pairs += int(cp_chunk_pairs(CpBalance::zigzag, cp, r, owner).size());
        CHECK(pairs == (2 * cp) * (2 * cp + 1) / 2);
    }
}
