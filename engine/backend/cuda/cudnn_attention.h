// --attention cudnn: one rank's whole causal sequence through cuDNN's fused flash attention, built from its C graph
// API (the matmul, pointwise and reduction graph that cuDNN's fused-attention engines take: forward with the
// softmax's log-sum-exp as "stats", backward from those stats). q, k, v are read in qkv and the gradients written
// into dqkv in place through strides (cudnn_sdpa_layout.h). A plan per shape and direction, built on first use and
// kept; the workspace comes from the backend's allocator (category workspace). UNVERIFIED on a GPU: docs/gpu.md.
#pragma once

#if ULTRASCOPE_HAVE_CUDNN_HEADERS
#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <string>

#include "common/core/allocator.h"
#include "engine/backend/cuda/cudnn_loader.h"
#include "engine/backend/cuda/cudnn_sdpa_layout.h"

namespace us::cuda {

class CudnnAttention {
public:
    // Loads cuDNN (UserError when it cannot, cudnn_loader.h) and makes a handle on `stream`. The backward is
    // built deterministic (no engine with cuDNN's NONDETERMINISTIC note, dq written without atomics) unless the
    // environment says ULTRASCOPE_CUDNN_NONDETERMINISTIC=1 (for measuring what determinism costs).
    CudnnAttention(cudaStream_t stream, TrackedAllocator& allocator, const std::string& library = "libcudnn.so.9");
    ~CudnnAttention();
    CudnnAttention(const CudnnAttention&) = delete;
    CudnnAttention& operator=(const CudnnAttention&) = delete;

    std::string describe() const;  // "cuDNN 9.10.2 fused attention (graph API), deterministic backward"
    // Builds the forward or backward plan of a shape once; empty when it has one, else why not (cuDNN's words).
    const std::string& prepare(const SdpaShape& s, bool backward);
    // out (B,T,C) bf16 and lse (B,NH,T) fp32 from qkv (B,T,3C) bf16; a prepared forward plan.
    void forward(const SdpaShape& s, const void* qkv, void* out, float* lse);
    // dq, dk, dv into dqkv (B,T,3C) bf16 from qkv, out, dout and lse; a prepared backward plan.
    void backward(const SdpaShape& s, const void* qkv, const void* out, const void* dout, const float* lse, void* dqkv);

    struct Plan;

private:
    Plan& plan(const SdpaShape& s, bool backward);

    CudnnApi m_api;
    cudnnHandle_t m_handle = nullptr;
    cudaStream_t m_stream = nullptr;
    TrackedAllocator& m_allocator;
    bool m_deterministic = true;
    std::map<std::pair<SdpaShape, bool>, std::unique_ptr<Plan>> m_plans;
};

}  // namespace us::cuda
#endif
