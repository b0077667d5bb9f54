// The CUDA backend: the Backend interface on one NVIDIA GPU. GEMMs and the attention products go to cuBLAS
// (fp32 without TF32, so fp32 runs match the CPU backend to rounding; bf16 on tensor cores with fp32
// accumulation), every other op is a kernel in this directory (kernels.h), launched on the compute stream. A
// second stream carries communication (NCCL, engine/comm/nccl_comm.cpp) so gradient all-reduces overlap the
// backward; the two streams are ordered with events. Device memory comes from the same TrackedAllocator as on the
// CPU (categories, events, a cache of freed blocks so the steady state calls cudaMalloc never), over cudaMalloc.
// Ops return before the GPU has run them (is_async): host-side spans are launches, CUPTI has the kernels.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <array>
#include <map>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/lt_linear.h"

namespace us {

namespace cuda {
class CudnnAttention;  // cudnn_attention.h: --attention cudnn
}

class CudaBackend final : public Backend {
public:
    explicit CudaBackend(int device);
    ~CudaBackend() override;

    std::string_view name() const override { return "cuda"; }
    std::string device_description() const override;
    bool is_async() const override { return true; }
    DevicePeak peak_flops(bool bf16) const override;
    int64_t device_used_bytes() const override;

    int device() const { return m_device; }
    cudaStream_t compute_stream() const { return m_compute; }
    cudaStream_t comm_stream() const { return m_comm; }

    US_BACKEND_OPS(US_BACKEND_DECLARE_OVERRIDE)
    void linear_forward(const GemmArgs& args, Tensor residual, Tensor bias) override;
    bool fuses_whole_attention(const AttentionBlockArgs& a) const override;
    bool fuses_gelu_epilogues(DType t) const override { return t == DType::bf16; }
    void linear_gelu_forward(const GemmArgs& args, Tensor bias, Tensor pre) override;
    void linear_dgelu_backward(const GemmArgs& args, Tensor pre) override;
    void attention_whole_forward(const AttentionBlockArgs& a, Tensor out, Tensor lse) override;
    void attention_whole_backward(const AttentionBlockArgs& a, Tensor dqkv, Tensor dout, Tensor out,
                                  Tensor lse) override;
    void synchronize() override;
    std::string attention_kernels() const override;
    // --attention cudnn: one rank's whole-sequence attention through cuDNN's fused attention, loaded now (UserError
    // naming the library when it cannot be). A shape cuDNN cannot take runs the tile kernels, with a notice.
    void use_cudnn_attention(const std::string& library = "libcudnn.so.9");
    bool uses_cudnn_attention() const { return m_cudnn != nullptr; }

private:
    // Whether cuDNN runs this call: its plan for the shape is built (once) and every buffer suits it; else false,
    // with a one-line notice per shape and direction saying why.
    bool cudnn_takes(const AttentionBlockArgs& a, bool backward, std::initializer_list<const void*> buffers);
    // Row-major C = alpha op(A) op(B) + beta C over `batch` matrices `stride_*` elements apart.
    void gemm_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const void* a, DType a_type,
                      int lda, long long stride_a, const void* b, DType b_type, int ldb, long long stride_b, float beta,
                      void* c, DType c_type, int ldc, long long stride_c, int batch);
    // Scratch for one op at a time on the compute stream: grows, never shrinks (so the steady state allocates
    // nothing); stream order makes reuse by the next op safe.
    void* scratch(size_t bytes);
    const float* rope_table(int T, int HD);  // (T, HD/2) cos then sin, built on the host as the CPU backend does
    int rope_rows(int T, Tensor positions);  // the table rows a positions tensor needs (its maximum + 1)
    double reduce(Tensor t, bool squares);

    int m_device = 0;
    std::string m_device_name;
    int m_sm_count = 0, m_cc_major = 0, m_cc_minor = 0;
    cudaStream_t m_compute = nullptr, m_comm = nullptr;
    cublasHandle_t m_cublas = nullptr;
    Allocation m_cublas_workspace, m_scratch, m_rope, m_reduce;
    std::unique_ptr<cuda::LtLinear> m_lt;           // bf16 linear layers: bias and residual in the GEMM (lt_linear.h)
    std::unique_ptr<cuda::CudnnAttention> m_cudnn;  // --attention cudnn
    std::set<std::string> m_cudnn_notices;          // shapes already reported as not taken by cuDNN
    int m_rope_T = 0, m_rope_HD = 0;
    std::map<const void*, int> m_positions_rows;
    double* m_reduce_host = nullptr;  // pinned
    // Uploads go through a small ring of pinned buffers, so the host does not wait for the GPU to drain before
    // it can reuse its own buffer (token batches are uploaded every micro-batch).
    struct Staging {
        void* host = nullptr;
        size_t bytes = 0;
        cudaEvent_t done = nullptr;
    };
    std::array<Staging, 4> m_staging{};
    size_t m_next_staging = 0;
};

// The device for this process: `device` when >= 0, else the node-local rank (from the launcher's environment)
// modulo the visible devices. UserError when no CUDA device is usable, with the reason.
std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& options);

// Whether a CUDA device is visible; when not, *why says what the runtime reported.
bool cuda_device_available(std::string* why = nullptr);

}  // namespace us
