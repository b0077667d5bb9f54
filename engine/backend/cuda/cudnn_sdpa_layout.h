// Where cuDNN's fused attention finds q, k, v, out and the log-sum-exp in our buffers, as its [B, H, S, D] tensors
// with strides: q, k and v are read in place in qkv (B, T, 3C) after RoPE, the gradients written in place in dqkv,
// out and dout are (B, T, C), the log-sum-exp (cuDNN's "stats") is (B, NH, T) fp32. No copies. Plain arithmetic,
// tested without a GPU or cuDNN (tests/cuda/test_cudnn_attention.cpp).
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <string>

#include "common/core/tensor.h"

namespace us::cuda {

// One call's shape: batch, sequence, heads, head dim.
struct SdpaShape {
    int B = 0, T = 0, NH = 0, HD = 0;
    auto operator<=>(const SdpaShape&) const = default;
};

struct SdpaTensorLayout {
    std::array<int64_t, 4> dims{}, strides{};  // cuDNN's order: batch, head, then two matrix dimensions
    int64_t offset = 0;                        // elements from the buffer's start
};

struct SdpaLayout {
    SdpaTensorLayout q, k, v;   // in qkv (dq, dk, dv the same in dqkv): [B, NH, T, HD]
    SdpaTensorLayout k_t, v_t;  // k and v transposed, [B, NH, HD, T]: the graph's right-hand matmul operands
    SdpaTensorLayout o;         // out and dout: [B, NH, T, HD]
    SdpaTensorLayout stats;     // lse: [B, NH, T, 1]
};

SdpaLayout sdpa_layout(int B, int T, int NH, int HD);

// Why cuDNN's fused attention cannot take this call, or empty when it can: bf16, head dim a multiple of 8 up to
// 128, every buffer (and so q, k, v at C elements apart) 16-byte aligned.
std::string sdpa_unsupported(DType t, int B, int T, int NH, int HD, bool buffers_aligned);

}  // namespace us::cuda
