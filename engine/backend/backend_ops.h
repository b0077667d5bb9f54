// The Backend's op list, written once. Backend (backend.h) declares each op pure virtual from it; the CPU, CUDA and
// profiling backends declare their overrides from it, so an op added here is declared everywhere and a backend that
// misses its definition fails to link instead of drifting. Each entry is X(return type, name, (parameters)).
//
// Dimension legend: B batch (sequences), T time (sequence length), C channels (hidden), OC output channels, V vocab,
// NH heads, HD head dim (C = NH * HD), N rows (= B * T). "+=" arguments accumulate, "=" arguments are overwritten.
// Comments inside the list are /* */ because every line ends in a backslash.
#pragma once

#define US_BACKEND_OPS(X)                                                                                            \
    /* ---- matrix multiply (GemmArgs in backend.h) */                                                               \
    X(void, gemm, (const GemmArgs& args))                                                                            \
    X(void, add_bias, (Tensor out /* (N,OC) */, Tensor bias /* (OC) */, int N, int OC))                              \
    X(void, bias_backward, (Tensor dbias /* (OC) += */, Tensor dout /* (N,OC) */, int N, int OC))                    \
                                                                                                                     \
    /* ---- LayerNorm (eps 1e-5); mean and rstd are fp32 (N) */                                                      \
    X(void, layernorm_forward,                                                                                       \
      (Tensor out /* (N,C) */, Tensor mean, Tensor rstd, Tensor inp /* (N,C) */, Tensor weight /* (C) */,            \
       Tensor bias /* (C) */, int N, int C))                                                                         \
    X(void, layernorm_backward,                                                                                      \
      (Tensor dinp /* (N,C) += */, Tensor dweight /* (C) += */, Tensor dbias /* (C) += */, Tensor dout /* (N,C) */,  \
       Tensor inp, Tensor weight, Tensor mean, Tensor rstd, int N, int C))                                           \
                                                                                                                     \
    /* ---- GeLU, tanh approximation */                                                                              \
    X(void, gelu_forward, (Tensor out, Tensor inp))                                                                  \
    X(void, gelu_backward, (Tensor dinp /* = */, Tensor inp, Tensor dout))                                           \
                                                                                                                     \
    /* ---- rotary position embedding on the q and k parts of qkv (B,T,3C), rotate-half, base 10000, in place.       \
       positions (T) i32: the position of each of a sequence's T rows (context parallelism holds chunks of the       \
       sequence); empty: 0..T-1. */                                                                                  \
    X(void, rope_forward, (Tensor qkv, int B, int T, int NH, int HD, Tensor positions))                              \
    X(void, rope_backward, (Tensor dqkv, int B, int T, int NH, int HD, Tensor positions))                            \
                                                                                                                     \
    /* ---- causal multi-head attention over qkv (B,T,3C), scale 1/sqrt(HD). probs (B,NH,T,T) is saved for           \
       backward, or empty (selective recompute: backward recomputes it). */                                          \
    X(void, attention_forward, (Tensor out /* (B,T,C) */, Tensor probs, Tensor qkv, int B, int T, int NH, int HD))   \
    X(void, attention_backward,                                                                                      \
      (Tensor dqkv /* (B,T,3C) = */, Tensor dout /* (B,T,C) */, Tensor qkv, Tensor probs, int B, int T, int NH,      \
       int HD))                                                                                                      \
                                                                                                                     \
    /* ---- blockwise attention (AttentionBlockArgs in backend.h). Running state in fp32: acc (B,T,C) the            \
       unnormalised output, row_max and row_sum (B,NH,T); all zero to start (a row whose sum is 0 has merged         \
       nothing, its max is unread). */                                                                               \
    X(void, attention_block_forward, (const AttentionBlockArgs& a, Tensor acc, Tensor row_max, Tensor row_sum))      \
    /* out (B,T,C) = acc / row_sum in out's dtype; lse (B,NH,T) fp32 = row_max + log(row_sum), for backward. */      \
    X(void, attention_block_finish,                                                                                  \
      (Tensor out, Tensor lse, Tensor acc, Tensor row_max, Tensor row_sum, int B, int T, int NH, int HD))            \
    /* delta (B,NH,T) fp32 = the sum over each head's columns of dout * out (softmax backward's row term). */        \
    X(void, attention_block_delta, (Tensor delta, Tensor dout, Tensor out, int B, int T, int NH, int HD))            \
    /* The pairs' gradients, P recomputed as exp(scale q.k - lse): dq (B,T,C) fp32 +=, dkv (B,T,2C) fp32 +=. */      \
    X(void, attention_block_backward,                                                                                \
      (const AttentionBlockArgs& a, Tensor dq, Tensor dkv, Tensor dout, Tensor lse, Tensor delta))                   \
    /* kv (B,T,2C) = the k and v columns of qkv (B,T,3C); and dqkv (B,T,3C) = [dq | dkv] in dqkv's dtype. */         \
    X(void, attention_block_pack_kv, (Tensor kv, Tensor qkv, int B, int T, int C))                                   \
    X(void, attention_block_store_grads, (Tensor dqkv, Tensor dq, Tensor dkv, int B, int T, int C))                  \
                                                                                                                     \
    /* ---- mixture of experts (engine/model/moe.h). Routing: the softmax of each token's E logits (fp32, in         \
       place), its K largest probabilities (ties: the lower expert first) and their renormalisation over the K,      \
       the gates. */                                                                                                 \
    X(void, moe_route,                                                                                               \
      (Tensor probs /* (N,E) fp32: logits in, probabilities out */, Tensor topk /* (N,K) i32 */,                     \
       Tensor gates /* (N,K) fp32 */, int N, int E, int K))                                                          \
    /* Its backward: dgates (N,K) through the renormalisation, plus the load-balancing loss's gradient on the        \
       probabilities (aux (S,E) fp32 per sequence of tokens_per_seq tokens; empty: none), through the softmax. */    \
    X(void, moe_route_backward,                                                                                      \
      (Tensor dlogits /* (N,E) fp32 = */, Tensor probs, Tensor topk, Tensor gates, Tensor dgates, Tensor aux, int N, \
       int E, int K, int tokens_per_seq))                                                                            \
    /* Dispatch: rows (N,K) i32 gives each (token, choice) its row of the expert-ordered buffer, or -1 when          \
       dropped. */                                                                                                   \
    X(void, moe_dispatch, (Tensor out /* (M,C) */, Tensor x /* (N,C) */, Tensor rows, int N, int K, int C))          \
    X(void, moe_dispatch_backward,                                                                                   \
      (Tensor dx /* (N,C) += */, Tensor dout /* (M,C) */, Tensor rows, int N, int K, int C))                         \
    /* Combine: out[n] += sum_k gates[n,k] y[rows[n,k]]. Backward: dy[rows[n,k]] = gates[n,k] dout[n],               \
       dgates[n,k] = <dout[n], y[rows[n,k]]> (0 when dropped). */                                                    \
    X(void, moe_combine,                                                                                             \
      (Tensor out /* (N,C) += */, Tensor y /* (M,C) */, Tensor rows, Tensor gates, int N, int K, int C))             \
    X(void, moe_combine_backward,                                                                                    \
      (Tensor dy /* (M,C) = */, Tensor dgates /* (N,K) fp32 = */, Tensor dout, Tensor y, Tensor rows, Tensor gates,  \
       int N, int K, int C))                                                                                         \
    /* dst[i] = src[index[i]] for i < M (C columns; index (M) i32): reordering rows for expert parallelism. */       \
    X(void, gather_rows, (Tensor dst, Tensor src, Tensor index, int M, int C))                                       \
                                                                                                                     \
    /* ---- elementwise */                                                                                           \
    X(void, residual_forward, (Tensor out, Tensor a, Tensor b)) /* out = a + b */                                    \
    X(void, fill_zero, (Tensor t))                                                                                   \
    X(void, copy, (Tensor dst, Tensor src))     /* converts when dtypes differ (rounding to nearest-even) */         \
    X(void, accumulate, (Tensor acc, Tensor x)) /* acc += x */                                                       \
    X(void, scale, (Tensor t, float factor))                                                                         \
    X(double, sum, (Tensor t))         /* in double (the loss of a micro-batch) */                                   \
    X(double, sum_squares, (Tensor t)) /* in double, for the global gradient norm */                                 \
    /* sum_deferred adds sum(t), in double, to a total the backend keeps, without waiting for the device (the loss   \
       of each micro-batch: a GPU keeps computing); take_deferred_sum returns that total once the device is done     \
       with it and starts a new one. The same additions in the same order as sum(). */                               \
    X(void, sum_deferred, (Tensor t))                                                                                \
    X(double, take_deferred_sum, ())                                                                                 \
                                                                                                                     \
    /* ---- token embedding (no position table: RoPE carries position). wte holds the vocabulary rows                \
       [vocab_begin, vocab_begin + V): all of it on one rank, a slice under vocabulary-parallel tensor               \
       parallelism, where tokens outside the slice embed to zeros (forward) and leave wte alone (backward). */       \
    X(void, embedding_forward,                                                                                       \
      (Tensor out /* (N,C) */, Tensor tokens /* (N) i32 */, Tensor wte /* (V,C) */, int N, int C, int vocab_begin,   \
       int V))                                                                                                       \
    X(void, embedding_backward,                                                                                      \
      (Tensor dwte /* (V,C) += */, Tensor dout /* (N,C) */, Tensor tokens, int N, int C, int vocab_begin, int V))    \
                                                                                                                     \
    /* ---- softmax cross-entropy; logits are fp32 and turn into probabilities in place, then into dlogits */        \
    X(void, crossentropy_forward,                                                                                    \
      (Tensor losses /* (N) fp32 */, Tensor logits /* (N,V) */, Tensor targets /* (N) i32 */, int N, int V))         \
    /* dlogits (N,V) = (probs - onehot) * dloss, written in dlogits' dtype: in place over the probabilities          \
       (fp32), or straight into the bf16 operand of the head's GEMMs (one pass instead of a write and a              \
       conversion). The logits are the vocabulary's columns [vocab_begin, + V) (vocab_begin = 0 on one rank), and    \
       a target outside them contributes no -1. */                                                                   \
    X(void, crossentropy_backward,                                                                                   \
      (Tensor dlogits /* (N,V) = */, Tensor probs /* (N,V) fp32 */, Tensor targets,                                  \
       float dloss /* d(loss)/d(per-token loss) */, int N, int V, int vocab_begin))                                  \
    /* Softmax cross-entropy over bf16 logits, forward and the backward's first step in one op (bf16 runs on one     \
       tensor-parallel rank, as llm.c fuses them): losses (N) fp32 = each token's loss, and the logits become, in    \
       place, probs - onehot in bf16, unscaled: the head's two GEMMs multiply by d(loss) in their alpha. */          \
    X(void, crossentropy_fused,                                                                                      \
      (Tensor losses /* (N) fp32 */, Tensor logits /* (N,V) bf16 -> dlogits */, Tensor targets, int N, int V))       \
    /* The vocabulary-parallel cross-entropy (Megatron-LM) in three steps around two reductions over the             \
       tensor-parallel group; each rank holds the logits of columns [vocab_begin, vocab_begin + V), of which the     \
       first `valid` are real tokens (the rest pad the vocabulary to a multiple of tp and are ignored).              \
         1. rowmax (N) = the largest valid logit of each row          -> all-reduce max                              \
         2. sums (N,2) = [sum of exp(logit - rowmax), the target's logit where this rank holds it, else 0]           \
                                                                       -> all-reduce sum                             \
         3. losses (N) = log(sum) + rowmax - target logit; the logits become probabilities (0 on padding) */         \
    X(void, crossentropy_local_max,                                                                                  \
      (Tensor rowmax /* (N) fp32 */, Tensor logits /* (N,V) */, int N, int V, int valid))                            \
    X(void, crossentropy_local_sums,                                                                                 \
      (Tensor sums /* (N,2) fp32 */, Tensor logits, Tensor rowmax, Tensor targets, int N, int V, int valid,          \
       int vocab_begin))                                                                                             \
    X(void, crossentropy_finish,                                                                                     \
      (Tensor losses /* (N) fp32 */, Tensor logits /* -> probs */, Tensor rowmax, Tensor sums, int N, int V,         \
       int valid))                                                                                                   \
                                                                                                                     \
    /* ---- optimizer (AdamWArgs in backend.h) */                                                                    \
    X(void, adamw, (const AdamWArgs& args))                                                                          \
                                                                                                                     \
    /* ---- host <-> backend memory (plain copies on the CPU backend) */                                             \
    X(void, upload, (Tensor dst, const void* host))                                                                  \
    X(void, download, (void* host, Tensor src))

// Declarations generated from the list: pure virtual in Backend, overrides in each backend.
#define US_BACKEND_DECLARE_PURE(ret, name, params) virtual ret name params = 0;
#define US_BACKEND_DECLARE_OVERRIDE(ret, name, params) ret name params override;
