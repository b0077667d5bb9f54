// The Backend interface: GEMM and every op of the model, one virtual call each (ops are coarse: a whole layer's
// LayerNorm, a whole attention), so the indirection costs nothing measurable. The CPU backend (OpenBLAS + OpenMP)
// is always built; the CUDA backend implements the same interface with the same file names under cuda/.
// The op list is written once, in backend_ops.h (with the dimension legend and each op's contract).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "engine/backend/backend_ops.h"
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

    // Every op, pure virtual, from the one list (backend_ops.h, where each is documented).
    US_BACKEND_OPS(US_BACKEND_DECLARE_PURE)

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

    // Causal attention over one rank's whole sequence, blockwise (--attention flash with cp 1): a.kv reads the keys
    // and values in qkv (kv_stride 3C) and the pairs cover the sequence. Forward: out (B,T,C) and lse (B,NH,T)
    // fp32; backward: dqkv (B,T,3C) =. These defaults compose the blockwise ops above through fp32 running state
    // and fp32 gradients (temporaries); a backend whose kernels write the final tensors themselves overrides them
    // and says so in fuses_whole_attention (then only the backward's deltas, (B,NH,T) fp32, are temporaries).
    virtual bool fuses_whole_attention(const AttentionBlockArgs& /*a*/) const { return false; }
    // The kernels of one rank's whole-sequence attention in words, for the run's metadata; empty where it is the
    // blockwise composition (the CPU).
    virtual std::string attention_kernels() const { return {}; }
    virtual void attention_whole_forward(const AttentionBlockArgs& a, Tensor out, Tensor lse);
    virtual void attention_whole_backward(const AttentionBlockArgs& a, Tensor dqkv, Tensor dout, Tensor out,
                                          Tensor lse);

    // The MLP's first linear layer and its GeLU: pre (m,n) = a·b + bias (kept for backward) and c = gelu(pre),
    // args.beta 0. And the input gradient through that GeLU: c (m,n) = gelu'(pre) * (a·b). These defaults run the
    // GEMM and the GeLU kernel; a backend with GEMM epilogues for them (cuBLASLt's GELU_AUX_BIAS and DGELU) does
    // each in one pass and says so in fuses_gelu_epilogues.
    virtual bool fuses_gelu_epilogues(DType /*t*/) const { return false; }
    virtual void linear_gelu_forward(const GemmArgs& args, Tensor bias, Tensor pre) {
        GemmArgs g = args;
        g.c = pre;
        linear_forward(g, Tensor{}, bias);
        gelu_forward(args.c, pre);
    }
    virtual void linear_dgelu_backward(const GemmArgs& args, Tensor pre) {
        gemm(args);
        gelu_backward(args.c, pre, args.c);
    }

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
    // --attention cudnn: one rank's whole-sequence attention through cuDNN's fused attention, loaded at run time
    // (UserError at creation when libcudnn.so.9 cannot be loaded). The CUDA backend only.
    bool cudnn_attention = false;
};

// Throws UserError when the kind is unknown or not built in.
std::unique_ptr<Backend> make_backend(const BackendOptions& options);

}  // namespace us
