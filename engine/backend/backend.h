// The Backend interface: GEMM and every op of the model, one virtual call each (ops are coarse: a whole layer's
// LayerNorm, a whole attention), so the indirection costs nothing measurable. The CPU backend (OpenBLAS + OpenMP)
// is always built; the CUDA backend implements the same interface with the same file names under cuda/.
//
// Dimension legend used in every signature: B batch (sequences), T time (sequence length), C channels (hidden),
// OC output channels, V vocab, NH heads, HD head dim (C = NH * HD), N rows (= B * T).
// Convention: "dX +=" arguments accumulate, "=" arguments are overwritten.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "engine/backend/device_peak.h"
#include "common/core/allocator.h"
#include "common/core/tensor.h"

namespace us {

// C (m, n) = alpha * op(A) (m, k) * op(B) (k, n) + beta * C. Row-major. A and B share a dtype (fp32 or bf16),
// C is fp32 or bf16; accumulation is fp32 in every case.
struct GemmArgs {
    bool trans_a = false;
    bool trans_b = false;
    int m = 0, n = 0, k = 0;
    float alpha = 1.0f;
    float beta = 0.0f;
    Tensor a;
    int lda = 0;
    Tensor b;
    int ldb = 0;
    Tensor c;
    int ldc = 0;
};

// Blockwise causal attention with an online softmax, for ring attention under context parallelism (Liu et al.
// 2023, "Ring Attention with Blockwise Transformers"; the merge is flash attention's, Dao et al. 2022). The rows of a
// sequence (T of them on this rank) are cut into chunks of `chunk` rows; a chunk pair is a query chunk against a key
// chunk: `causal` for the diagonal pair (both chunks cover the same positions: query i sees keys j <= i), every key
// visible otherwise (the caller skips pairs whose keys all lie after their queries).
struct AttentionChunkPair {
    int q_chunk = 0, k_chunk = 0;
    bool causal = false;
};

struct AttentionBlockArgs {
    Tensor qkv;  // (B,T,3C): the queries at columns [0, C), head h at [h HD, (h+1) HD)
    Tensor kv;   // (B,T,2C): a key/value block, k at columns [0, C), v at [C, 2C), in qkv's dtype
    int B = 1, T = 1, NH = 1, HD = 1, chunk = 1;
    const AttentionChunkPair* pairs = nullptr;
    int pair_count = 0;
    // Elements between kv's rows: 0 means a packed block (2C). One rank (--attention flash) reads k and v straight
    // from qkv: kv = qkv from column C on, kv_stride 3C.
    int kv_stride = 0;
    int64_t kv_row_stride() const { return kv_stride > 0 ? kv_stride : 2 * int64_t(NH) * HD; }
};

// One AdamW step (Loshchilov & Hutter) over a range, matching torch.optim.AdamW: decoupled weight decay, bias
// correction. With `master` set, the fp32 master weights are updated and `params` receives them rounded to bf16.
struct AdamWArgs {
    Tensor params;  // fp32 or bf16, updated
    Tensor master;  // fp32 master weights, or empty when params are fp32
    Tensor grads;   // fp32 or bf16
    Tensor m;       // fp32 first moment
    Tensor v;       // fp32 second moment
    // Hyperparameters in double, as Python floats are in PyTorch; each becomes fp32 where torch's kernels do.
    double lr = 0.0;
    double beta1 = 0.9;
    double beta2 = 0.95;
    double eps = 1e-8;
    double weight_decay = 0.0;
    float grad_scale = 1.0f;  // the clipping coefficient, applied to grads before the update
    int step = 1;             // 1-based, for bias correction
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string_view name() const = 0;
    virtual std::string device_description() const = 0;
    virtual TrackedAllocator& allocator() { return *m_allocator; }
    // Whether ops return before the device finishes them (CUDA): their host-side spans are then launches.
    virtual bool is_async() const { return false; }
    // The device's dense peak for MFU (bf16 tensor cores, or fp32) and where it came from (device_peak.h); none
    // when the backend's peak is measured instead (the CPU: profiling measures sgemm on the rank's threads).
    virtual DevicePeak peak_flops(bool /*bf16*/) const { return {}; }
    // The device memory in use, as the driver reports it (every process on the device), or -1 for the CPU.
    virtual int64_t device_used_bytes() const { return -1; }

    // ---- matrix multiply
    virtual void gemm(const GemmArgs& args) = 0;
    virtual void add_bias(Tensor out /* (N,OC) */, Tensor bias /* (OC) */, int N, int OC) = 0;
    // A linear layer's output: c (m,n) = a·b + residual (m,n) + bias (n) over the rows, residual and bias each
    // optional, args.beta 0. This default runs the GEMM and adds the rest around it; the CPU backend folds both into
    // one pass that fills c before the GEMM accumulates into it.
    virtual void linear_forward(const GemmArgs& args, Tensor residual, Tensor bias) {
        GemmArgs g = args;
        if (!residual.empty()) {
            copy(g.c, residual);
            g.beta = 1.0f;
        }
        gemm(g);
        if (!bias.empty()) add_bias(g.c, bias, g.m, g.n);
    }
    virtual void bias_backward(Tensor dbias /* (OC) += */, Tensor dout /* (N,OC) */, int N, int OC) = 0;

    // ---- LayerNorm (eps 1e-5); mean and rstd are fp32 (N)
    virtual void layernorm_forward(Tensor out /* (N,C) */, Tensor mean, Tensor rstd, Tensor inp /* (N,C) */,
                                   Tensor weight /* (C) */, Tensor bias /* (C) */, int N, int C) = 0;
    virtual void layernorm_backward(Tensor dinp /* (N,C) += */, Tensor dweight /* (C) += */,
                                    Tensor dbias /* (C) += */, Tensor dout /* (N,C) */, Tensor inp, Tensor weight,
                                    Tensor mean, Tensor rstd, int N, int C) = 0;

    // ---- GeLU, tanh approximation
    virtual void gelu_forward(Tensor out, Tensor inp) = 0;
    virtual void gelu_backward(Tensor dinp /* = */, Tensor inp, Tensor dout) = 0;

    // ---- rotary position embedding on the q and k parts of qkv (B,T,3C), rotate-half, base 10000, in place.
    // positions (T) i32: the position of each of a sequence's T rows (context parallelism holds chunks of the
    // sequence); empty: 0..T-1.
    virtual void rope_forward(Tensor qkv, int B, int T, int NH, int HD, Tensor positions) = 0;
    virtual void rope_backward(Tensor dqkv, int B, int T, int NH, int HD, Tensor positions) = 0;

    // ---- causal multi-head attention over qkv (B,T,3C), scale 1/sqrt(HD).
    // probs (B,NH,T,T) is saved for backward, or empty (selective recompute: backward recomputes it).
    virtual void attention_forward(Tensor out /* (B,T,C) */, Tensor probs, Tensor qkv, int B, int T, int NH,
                                   int HD) = 0;
    virtual void attention_backward(Tensor dqkv /* (B,T,3C) = */, Tensor dout /* (B,T,C) */, Tensor qkv,
                                    Tensor probs, int B, int T, int NH, int HD) = 0;

    // ---- blockwise attention (AttentionBlockArgs). Running state in fp32: acc (B,T,C) the unnormalised output,
    // row_max and row_sum (B,NH,T); all zero to start (a row whose sum is 0 has merged nothing, its max is unread).
    virtual void attention_block_forward(const AttentionBlockArgs& a, Tensor acc, Tensor row_max, Tensor row_sum) = 0;
    // out (B,T,C) = acc / row_sum in out's dtype; lse (B,NH,T) fp32 = row_max + log(row_sum), what backward needs.
    virtual void attention_block_finish(Tensor out, Tensor lse, Tensor acc, Tensor row_max, Tensor row_sum, int B,
                                        int T, int NH, int HD) = 0;
    // delta (B,NH,T) fp32 = the sum over each head's columns of dout * out (softmax backward's row term).
    virtual void attention_block_delta(Tensor delta, Tensor dout, Tensor out, int B, int T, int NH, int HD) = 0;
    // The pairs' gradients, with P recomputed as exp(scale q.k - lse): dq (B,T,C) fp32 +=, dkv (B,T,2C) fp32 +=.
    virtual void attention_block_backward(const AttentionBlockArgs& a, Tensor dq, Tensor dkv, Tensor dout, Tensor lse,
                                          Tensor delta) = 0;
    // kv (B,T,2C) = the k and v columns of qkv (B,T,3C); and dqkv (B,T,3C) = [dq | dkv] in dqkv's dtype.
    virtual void attention_block_pack_kv(Tensor kv, Tensor qkv, int B, int T, int C) = 0;
    virtual void attention_block_store_grads(Tensor dqkv, Tensor dq, Tensor dkv, int B, int T, int C) = 0;

    // ---- mixture of experts (engine/model/moe.h). Routing: the softmax of each token's E logits (fp32, in place),
    // its K largest probabilities (ties: the lower expert first) and their renormalisation over the K, the gates.
    virtual void moe_route(Tensor probs /* (N,E) fp32: logits in, probabilities out */, Tensor topk /* (N,K) i32 */,
                           Tensor gates /* (N,K) fp32 */, int N, int E, int K) = 0;
    // Its backward: dgates (N,K) through the renormalisation, plus the load-balancing loss's gradient on the
    // probabilities (aux (S,E) fp32 per sequence of tokens_per_seq tokens; empty: none), through the softmax.
    virtual void moe_route_backward(Tensor dlogits /* (N,E) fp32 = */, Tensor probs, Tensor topk, Tensor gates,
                                    Tensor dgates, Tensor aux, int N, int E, int K, int tokens_per_seq) = 0;
    // Dispatch: rows (N,K) i32 gives each (token, choice) its row of the expert-ordered buffer, or -1 when dropped.
    virtual void moe_dispatch(Tensor out /* (M,C) */, Tensor x /* (N,C) */, Tensor rows, int N, int K, int C) = 0;
    virtual void moe_dispatch_backward(Tensor dx /* (N,C) += */, Tensor dout /* (M,C) */, Tensor rows, int N, int K,
                                       int C) = 0;
    // Combine: out[n] += sum_k gates[n,k] y[rows[n,k]]. Backward: dy[rows[n,k]] = gates[n,k] dout[n],
    // dgates[n,k] = <dout[n], y[rows[n,k]]> (0 when dropped).
    virtual void moe_combine(Tensor out /* (N,C) += */, Tensor y /* (M,C) */, Tensor rows, Tensor gates, int N, int K,
                             int C) = 0;
    virtual void moe_combine_backward(Tensor dy /* (M,C) = */, Tensor dgates /* (N,K) fp32 = */, Tensor dout, Tensor y,
                                      Tensor rows, Tensor gates, int N, int K, int C) = 0;
    // dst[i] = src[index[i]] for i < M (C columns; index (M) i32): reordering rows for expert parallelism.
    virtual void gather_rows(Tensor dst, Tensor src, Tensor index, int M, int C) = 0;

    // ---- elementwise
    virtual void residual_forward(Tensor out, Tensor a, Tensor b) = 0;  // out = a + b
    virtual void fill_zero(Tensor t) = 0;
    virtual void copy(Tensor dst, Tensor src) = 0;        // converts when dtypes differ (rounding to nearest-even)
    virtual void accumulate(Tensor acc, Tensor x) = 0;    // acc += x
    virtual void scale(Tensor t, float factor) = 0;
    virtual double sum(Tensor t) = 0;                     // in double (the loss of a micro-batch)
    virtual double sum_squares(Tensor t) = 0;             // in double, for the global gradient norm

    // ---- token embedding (no position table: RoPE carries position). wte holds the vocabulary rows
    // [vocab_begin, vocab_begin + V): all of it on one rank, a slice under vocabulary-parallel tensor parallelism,
    // where tokens outside the slice embed to zeros (forward) and leave wte alone (backward).
    virtual void embedding_forward(Tensor out /* (N,C) */, Tensor tokens /* (N) i32 */, Tensor wte /* (V,C) */,
                                   int N, int C, int vocab_begin, int V) = 0;
    virtual void embedding_backward(Tensor dwte /* (V,C) += */, Tensor dout /* (N,C) */, Tensor tokens, int N,
                                    int C, int vocab_begin, int V) = 0;

    // ---- softmax cross-entropy; logits are fp32 and turn into probabilities in place, then into dlogits
    virtual void crossentropy_forward(Tensor losses /* (N) fp32 */, Tensor logits /* (N,V) */,
                                      Tensor targets /* (N) i32 */, int N, int V) = 0;
    // dlogits (N,V) = (probs - onehot) * dloss, written in dlogits' dtype: in place over the probabilities (fp32), or
    // straight into the bf16 operand of the head's GEMMs (one pass instead of a write and a conversion). The logits
    // are the vocabulary's columns [vocab_begin, + V) (vocab_begin = 0 on one rank), and a target outside them
    // contributes no -1.
    virtual void crossentropy_backward(Tensor dlogits /* (N,V) = */, Tensor probs /* (N,V) fp32 */, Tensor targets,
                                       float dloss /* d(loss)/d(per-token loss) */, int N, int V,
                                       int vocab_begin) = 0;
    // The vocabulary-parallel cross-entropy (Megatron-LM) in three steps around two reductions over the
    // tensor-parallel group; each rank holds the logits of columns [vocab_begin, vocab_begin + V), of which the
    // first `valid` are real tokens (the rest pad the vocabulary to a multiple of tp and are ignored).
    //   1. rowmax (N) = the largest valid logit of each row          -> all-reduce max
    //   2. sums (N,2) = [sum of exp(logit - rowmax), the target's logit where this rank holds it, else 0]
    //                                                                  -> all-reduce sum
    //   3. losses (N) = log(sum) + rowmax - target logit; the logits become probabilities (0 on padding)
    virtual void crossentropy_local_max(Tensor rowmax /* (N) fp32 */, Tensor logits /* (N,V) */, int N, int V,
                                        int valid) = 0;
    virtual void crossentropy_local_sums(Tensor sums /* (N,2) fp32 */, Tensor logits, Tensor rowmax, Tensor targets,
                                         int N, int V, int valid, int vocab_begin) = 0;
    virtual void crossentropy_finish(Tensor losses /* (N) fp32 */, Tensor logits /* -> probs */, Tensor rowmax,
                                     Tensor sums, int N, int V, int valid) = 0;

    // ---- optimizer
    virtual void adamw(const AdamWArgs& args) = 0;

    // Host <-> backend memory (plain copies on the CPU backend).
    virtual void upload(Tensor dst, const void* host) = 0;
    virtual void download(void* host, Tensor src) = 0;

    virtual void synchronize() {}

    // Called between ops (after each GEMM) so that communication can progress from the compute loop
    // (--comm-progress poll); null by default.
    virtual void set_progress_hook(void (*hook)()) { m_progress_hook = hook; }

protected:
    std::unique_ptr<TrackedAllocator> m_allocator;
    void (*m_progress_hook)() = nullptr;
};

struct BackendOptions {
    std::string kind = "cpu";  // cpu | cuda
    int threads = 0;           // CPU threads; 0 = all cores
    int device = -1;           // CUDA device ordinal; -1: the node-local rank modulo the visible devices
};

// Throws UserError when the kind is unknown or not built in.
std::unique_ptr<Backend> make_backend(const BackendOptions& options);

}  // namespace us
