// The linear layers' forward through cuBLASLt: out = a·op(b) (+ residual) + bias as ONE GEMM whose epilogue adds
// the bias and whose C operand is the residual (D is the output), so the copy of the residual into the output and
// the separate bias pass never run (on gpt2-124m bf16 they cost 1.06 ms of a 34 ms step on an H100). The MLP's GeLU
// rides the same way: GELU_AUX_BIAS writes gelu(a·b + bias) and keeps a·b + bias (the aux output) for backward,
// DGELU multiplies the input gradient by gelu' of that aux (llm.c does both on Hopper). The plans (descriptors,
// layouts, the heuristic's algorithm) are built once per shape, epilogue and alignment, then reused.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <tuple>

#include "engine/backend/backend.h"

namespace us::cuda {

class LtLinear {
public:
    LtLinear(void* workspace, size_t workspace_bytes);
    ~LtLinear();
    LtLinear(const LtLinear&) = delete;
    LtLinear& operator=(const LtLinear&) = delete;

    // c = a·op(b) + residual + bias, as GemmArgs describes (row-major, beta 0); residual and bias may be empty.
    // False when cuBLASLt offers no algorithm for the case: the caller runs cublasGemmEx and the bias kernel.
    bool forward(const GemmArgs& g, Tensor residual, Tensor bias, cudaStream_t stream);
    // pre = a·op(b) + bias (bias may be empty) and c = gelu(pre), tanh approximation; pre laid out as c.
    bool gelu_forward(const GemmArgs& g, Tensor bias, Tensor pre, cudaStream_t stream);
    // c = gelu'(pre) * a·op(b); pre laid out as c.
    bool dgelu_backward(const GemmArgs& g, Tensor pre, cudaStream_t stream);

private:
    enum class Epilogue { none, bias, gelu_aux, gelu_aux_bias, dgelu };
    bool run(const GemmArgs& g, Tensor residual, Tensor bias, Tensor aux, Epilogue epilogue, cudaStream_t stream);
    // trans_a, trans_b, m, n, k, lda, ldb, ldc, operand type, output type, bias type (or -1), residual?, alignment,
    // epilogue, aux type (or -1)
    using Key = std::tuple<bool, bool, int, int, int, int, int, int, int, int, int, bool, int, int, int>;
    struct Plan;
    Plan* plan_for(const Key& key, const GemmArgs& g, Tensor bias, Tensor aux, Epilogue epilogue, int alignment);

    cublasLtHandle_t m_handle = nullptr;
    void* m_workspace;
    size_t m_workspace_bytes;
    std::map<Key, std::unique_ptr<Plan>> m_plans;
};

}  // namespace us::cuda
