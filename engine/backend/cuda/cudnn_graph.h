// A small writer of cuDNN backend descriptors (tensors, pointwise, reduction, matmul and reshape operations, the
// operation graph) and of an execution plan from cuDNN's heuristics, over the functions cudnn_loader.h looked up.
// Every descriptor it makes is kept in `owned` and destroyed with it; a failed call throws CudnnFailure with
// cuDNN's words, so a graph cuDNN has no engine for becomes a message (cudnn_attention.cpp), not a crash.
#pragma once

#if ULTRASCOPE_HAVE_CUDNN_HEADERS
#include <array>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/backend/cuda/cudnn_loader.h"

namespace us::cuda {

struct CudnnFailure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

using Dims4 = std::array<int64_t, 4>;

class CudnnGraph {
public:
    CudnnGraph(const CudnnApi& api, cudnnHandle_t handle) : m_api(api), m_handle(handle) {}
    // Without a GPU (cuDNN 9.8 or newer): plans for the device a JSON device description names (cuDNN's
    // CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION), which cannot run but say whether cuDNN has an engine for the graph.
    CudnnGraph(const CudnnApi& api, const std::string& device_json);
    ~CudnnGraph();
    CudnnGraph(const CudnnGraph&) = delete;
    CudnnGraph& operator=(const CudnnGraph&) = delete;

    // A tensor the variant pack gives memory (uid of the caller's), or a by-value fp32 scalar (host pointer).
    cudnnBackendDescriptor_t tensor(int64_t uid, cudnnDataType_t t, const Dims4& dims, const Dims4& strides);
    cudnnBackendDescriptor_t scalar(int64_t uid);
    // An intermediate the fused kernel keeps to itself: packed row-major unless strides are given.
    cudnnBackendDescriptor_t virtual_tensor(cudnnDataType_t t, const Dims4& dims);
    cudnnBackendDescriptor_t virtual_tensor(cudnnDataType_t t, const Dims4& dims, const Dims4& strides);

    // y = mode(x[, b[, t]]); GEN_INDEX takes an axis; comparisons compute in BOOLEAN, the rest in fp32.
    void pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                   cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, int64_t axis = -1);
    void reduction(cudnnReduceTensorOp_t op, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y);
    void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c);
    void reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y);

    // The operation graph of every operation so far, then the first execution plan of cuDNN's heuristics (mode A,
    // then the fallback list) that finalizes, skipping engines noted NONDETERMINISTIC when `deterministic`.
    // CudnnFailure with what was tried when none does.
    cudnnBackendDescriptor_t build_plan(bool deterministic, std::string* engine_note, int64_t* workspace);

private:
    cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t type);
    void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
             int64_t count, const void* values);
    void finalize(cudnnBackendDescriptor_t d, const char* what);
    void check(cudnnStatus_t status, const std::string& what) const;
    cudnnBackendDescriptor_t plan_from(cudnnBackendHeurMode_t mode, bool deterministic, std::string* tried,
                                       std::string* engine_note, int64_t* workspace);
    enum class TensorKind { in_memory, by_value, is_virtual };
    // The one tensor descriptor all three kinds are: 16-byte aligned, the kind's flag set.
    cudnnBackendDescriptor_t tensor_descriptor(int64_t uid, cudnnDataType_t t, const Dims4& dims, const Dims4& strides,
                                               TensorKind kind);

    const CudnnApi& m_api;
    cudnnHandle_t m_handle = nullptr;
    cudnnBackendDescriptor_t m_device = nullptr;  // deviceless planning
    std::vector<cudnnBackendDescriptor_t> m_owned;
    std::vector<cudnnBackendDescriptor_t> m_ops;
    cudnnBackendDescriptor_t m_graph = nullptr;
    int64_t m_next_virtual = 1000;  // virtual tensors' uids, above the caller's
};

}  // namespace us::cuda
#endif
