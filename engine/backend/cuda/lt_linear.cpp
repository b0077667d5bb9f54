#include "engine/backend/cuda/lt_linear.h"

#include <cstdint>

#include "engine/backend/cuda/cuda_check.h"

namespace us::cuda {

namespace {

cudaDataType_t lt_type(DType t) { return t == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F; }

// The largest power of two (up to 256) that divides every address: cuBLASLt picks algorithms for an alignment.
int alignment_of(std::initializer_list<const void*> pointers) {
    int a = 256;
    for (const void* p : pointers)
        if (p)
            while (a > 1 && reinterpret_cast<uintptr_t>(p) % uintptr_t(a) != 0) a /= 2;
    return a;
}

}  // namespace

struct LtLinear::Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool usable = false;
    ~Plan() {
        if (desc) cublasLtMatmulDescDestroy(desc);
        for (auto* l : {a, b, c})
            if (l) cublasLtMatrixLayoutDestroy(l);
    }
};

LtLinear::LtLinear(void* workspace, size_t workspace_bytes)
    : m_workspace(workspace), m_workspace_bytes(workspace_bytes) {
    US_CUBLAS_CHECK(cublasLtCreate(&m_handle));
}

LtLinear::~LtLinear() {
    m_plans.clear();
    if (m_handle) cublasLtDestroy(m_handle);
}

// Row-major c (m,n) = op(a) op(b) is column-major cᵀ (n,m) = op(b)ᵀ op(a)ᵀ: cuBLASLt's A is our b and its B our a,
// and a bias over our columns is a bias over its rows, which is what the BIAS epilogue broadcasts.
LtLinear::Plan* LtLinear::plan_for(const Key& key, const GemmArgs& g, Tensor bias, Tensor aux, Epilogue epilogue,
                                   int alignment) {
    auto it = m_plans.find(key);
    if (it != m_plans.end()) return it->second.get();
    auto plan = std::make_unique<Plan>();
    const cublasOperation_t op_a = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    bool ok = cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS;
    ok = ok && cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)) == 0;
    ok = ok && cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)) == 0;
    const cublasLtEpilogue_t lt_epilogue = epilogue == Epilogue::bias            ? CUBLASLT_EPILOGUE_BIAS
                                           : epilogue == Epilogue::gelu_aux      ? CUBLASLT_EPILOGUE_GELU_AUX
                                           : epilogue == Epilogue::gelu_aux_bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                           : epilogue == Epilogue::dgelu         ? CUBLASLT_EPILOGUE_DGELU
                                                                                 : CUBLASLT_EPILOGUE_DEFAULT;
    ok = ok && cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &lt_epilogue,
                                              sizeof(lt_epilogue)) == 0;
    if (!bias.empty()) {
        const cudaDataType_t bias_type = lt_type(bias.dtype);
        ok = ok && cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                  sizeof(bias_type)) == 0;
    }
    if (!aux.empty()) {  // the aux matrix has D's shape and leading dimension (our row-major c)
        const int64_t aux_ld = g.ldc;
        const cudaDataType_t aux_type = lt_type(aux.dtype);
        ok = ok && cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                                  sizeof(aux_ld)) == 0;
        ok = ok && cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &aux_type,
                                                  sizeof(aux_type)) == 0;
    }
    // stored shapes, column-major: our b is (n x k) with trans_b, else (k x n); our a (k x m) unless trans_a
    const uint64_t b_rows = g.trans_b ? g.k : g.n, b_cols = g.trans_b ? g.n : g.k;
    const uint64_t a_rows = g.trans_a ? g.m : g.k, a_cols = g.trans_a ? g.k : g.m;
    ok = ok && cublasLtMatrixLayoutCreate(&plan->a, lt_type(g.b.dtype), b_rows, b_cols, g.ldb) == 0;
    ok = ok && cublasLtMatrixLayoutCreate(&plan->b, lt_type(g.a.dtype), a_rows, a_cols, g.lda) == 0;
    ok = ok && cublasLtMatrixLayoutCreate(&plan->c, lt_type(g.c.dtype), uint64_t(g.n), uint64_t(g.m), g.ldc) == 0;
    if (ok) {
        cublasLtMatmulPreference_t pref = nullptr;
        ok = cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS;
        const uint64_t bytes = m_workspace_bytes;
        const uint32_t align = uint32_t(alignment);
        ok = ok && cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes,
                                                        sizeof(bytes)) == 0;
        for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
            ok = ok && cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)) == 0;
        cublasLtMatmulHeuristicResult_t result{};
        int found = 0;
        ok = ok && cublasLtMatmulAlgoGetHeuristic(m_handle, plan->desc, plan->a, plan->b, plan->c, plan->c, pref, 1,
                                                  &result, &found) == CUBLAS_STATUS_SUCCESS;
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
        plan->usable = ok && found > 0;
        if (plan->usable) plan->algo = result.algo;
    }
    Plan* p = plan.get();
    m_plans.emplace(key, std::move(plan));
    return p;
}

bool LtLinear::forward(const GemmArgs& g, Tensor residual, Tensor bias, cudaStream_t stream) {
    return run(g, residual, bias, Tensor{}, bias.empty() ? Epilogue::none : Epilogue::bias, stream);
}

bool LtLinear::gelu_forward(const GemmArgs& g, Tensor bias, Tensor pre, cudaStream_t stream) {
    return run(g, Tensor{}, bias, pre, bias.empty() ? Epilogue::gelu_aux : Epilogue::gelu_aux_bias, stream);
}

bool LtLinear::dgelu_backward(const GemmArgs& g, Tensor pre, cudaStream_t stream) {
    return run(g, Tensor{}, Tensor{}, pre, Epilogue::dgelu, stream);
}

bool LtLinear::run(const GemmArgs& g, Tensor residual, Tensor bias, Tensor aux, Epilogue epilogue,
                   cudaStream_t stream) {
    if (g.beta != 0.0f || g.a.dtype != g.b.dtype) return false;
    const int alignment = alignment_of(
        {g.a.data, g.b.data, g.c.data, residual.empty() ? nullptr : residual.data, aux.empty() ? nullptr : aux.data});
    const Key key{g.trans_a,
                  g.trans_b,
                  g.m,
                  g.n,
                  g.k,
                  g.lda,
                  g.ldb,
                  g.ldc,
                  int(g.a.dtype),
                  int(g.c.dtype),
                  bias.empty() ? -1 : int(bias.dtype),
                  !residual.empty(),
                  alignment,
                  int(epilogue),
                  aux.empty() ? -1 : int(aux.dtype)};
    Plan* plan = plan_for(key, g, bias, aux, epilogue, alignment);
    if (!plan->usable) return false;
    if (!bias.empty() && cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias.data,
                                                        sizeof(bias.data)) != CUBLAS_STATUS_SUCCESS)
        return false;
    if (!aux.empty() && cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux.data,
                                                       sizeof(aux.data)) != CUBLAS_STATUS_SUCCESS)
        return false;
    const float alpha = g.alpha, beta = residual.empty() ? 0.0f : 1.0f;
    const void* c_in = residual.empty() ? g.c.data : residual.data;  // the residual is C; D is the output
    US_CUBLAS_CHECK(cublasLtMatmul(m_handle, plan->desc, &alpha, g.b.data, plan->a, g.a.data, plan->b, &beta, c_in,
                                   plan->c, g.c.data, plan->c, &plan->algo, m_workspace, m_workspace_bytes, stream));
    return true;
}

}  // namespace us::cuda
