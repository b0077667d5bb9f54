// cuDNN backend descriptors written attribute by attribute (cudnn_graph.h), as cuDNN's graph API documents them:
// create, set attributes, finalize; then heuristics, engine configurations and an execution plan.
#include "engine/backend/cuda/cudnn_graph.h"

#if ULTRASCOPE_HAVE_CUDNN_HEADERS
#include <fmt/format.h>

#include <algorithm>

namespace us::cuda {

CudnnGraph::CudnnGraph(const CudnnApi& api, const std::string& device_json) : m_api(api) {
    m_device = make(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR);
    set(m_device, CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, int64_t(device_json.size()),
        device_json.data());
    finalize(m_device, "device description");
}

CudnnGraph::~CudnnGraph() {
    for (auto it = m_owned.rbegin(); it != m_owned.rend(); ++it) m_api.destroy_descriptor(*it);
}

void CudnnGraph::check(cudnnStatus_t status, const std::string& what) const {
    if (status != CUDNN_STATUS_SUCCESS) throw CudnnFailure(fmt::format("{}: {}", what, m_api.describe(status)));
}

cudnnBackendDescriptor_t CudnnGraph::make(cudnnBackendDescriptorType_t type) {
    cudnnBackendDescriptor_t d = nullptr;
    check(m_api.create_descriptor(type, &d), fmt::format("creating a descriptor of type {}", int(type)));
    m_owned.push_back(d);
    return d;
}

void CudnnGraph::set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                     int64_t count, const void* values) {
    check(m_api.set_attribute(d, name, type, count, values), fmt::format("setting attribute {}", int(name)));
}

void CudnnGraph::finalize(cudnnBackendDescriptor_t d, const char* what) {
    check(m_api.finalize(d), fmt::format("finalizing the {}", what));
}

namespace {
Dims4 packed_strides(const Dims4& dims) { return {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1}; }
}  // namespace

cudnnBackendDescriptor_t CudnnGraph::tensor_descriptor(int64_t uid, cudnnDataType_t t, const Dims4& dims,
                                                       const Dims4& strides, TensorKind kind) {
    cudnnBackendDescriptor_t d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t alignment = 16;
    const bool yes = true;
    set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &t);
    set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
    set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
    set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
    if (kind == TensorKind::by_value) set(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes);
    if (kind == TensorKind::is_virtual) set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes);
    finalize(d, kind == TensorKind::by_value     ? "scalar tensor"
                : kind == TensorKind::is_virtual ? "virtual tensor"
                                                 : "tensor");
    return d;
}

cudnnBackendDescriptor_t CudnnGraph::tensor(int64_t uid, cudnnDataType_t t, const Dims4& dims, const Dims4& strides) {
    return tensor_descriptor(uid, t, dims, strides, TensorKind::in_memory);
}

cudnnBackendDescriptor_t CudnnGraph::scalar(int64_t uid) {
    const Dims4 ones{1, 1, 1, 1};
    return tensor_descriptor(uid, CUDNN_DATA_FLOAT, ones, ones, TensorKind::by_value);
}

cudnnBackendDescriptor_t CudnnGraph::virtual_tensor(cudnnDataType_t t, const Dims4& dims) {
    return virtual_tensor(t, dims, packed_strides(dims));
}

cudnnBackendDescriptor_t CudnnGraph::virtual_tensor(cudnnDataType_t t, const Dims4& dims, const Dims4& strides) {
    return tensor_descriptor(m_next_virtual++, t, dims, strides, TensorKind::is_virtual);
}

void CudnnGraph::pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                           cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, int64_t axis) {
    cudnnBackendDescriptor_t pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    const cudnnDataType_t precision = mode == CUDNN_POINTWISE_CMP_GE ? CUDNN_DATA_BOOLEAN : CUDNN_DATA_FLOAT;
    set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision);
    if (axis >= 0) set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    finalize(pw, "pointwise descriptor");
    cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw);
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    if (b) set(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    if (t) set(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    finalize(op, fmt::format("pointwise operation (mode {})", int(mode)).c_str());
    m_ops.push_back(op);
}

void CudnnGraph::reduction(cudnnReduceTensorOp_t op_type, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t r = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
    set(r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &op_type);
    set(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &precision);
    finalize(r, "reduction descriptor");
    cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    set(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &r);
    set(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    set(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    finalize(op, "reduction operation");
    m_ops.push_back(op);
}

void CudnnGraph::matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
    cudnnBackendDescriptor_t mm = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
    set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &precision);
    finalize(mm, "matmul descriptor");
    cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    set(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a);
    set(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    set(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
    set(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm);
    finalize(op, "matmul operation");
    m_ops.push_back(op);
}

void CudnnGraph::reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    set(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    set(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    finalize(op, "reshape operation");
    m_ops.push_back(op);
}

// One heuristics mode's list, in cuDNN's order: the first configuration that is allowed and finalizes a plan.
cudnnBackendDescriptor_t CudnnGraph::plan_from(cudnnBackendHeurMode_t mode, bool deterministic, std::string* tried,
                                               std::string* engine_note, int64_t* workspace) {
    cudnnBackendDescriptor_t heur = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &m_graph);
    set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (m_device) set(heur, CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &m_device);
    finalize(heur, "engine heuristics");
    constexpr int kMaxConfigs = 16;
    std::vector<cudnnBackendDescriptor_t> configs;
    for (int i = 0; i < kMaxConfigs; ++i) configs.push_back(make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    int64_t count = 0;
    check(m_api.get_attribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, kMaxConfigs, &count,
                              configs.data()),
          "reading the heuristics' engine configurations");
    for (int64_t i = 0; i < std::min<int64_t>(count, kMaxConfigs); ++i) {
        cudnnBackendDescriptor_t engine = make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
        int64_t n = 0, index = -1;
        check(m_api.get_attribute(configs[size_t(i)], CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                  &engine),
              "reading an engine configuration's engine");
        m_api.get_attribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &index);
        cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT] = {};
        int64_t note_count = 0;
        m_api.get_attribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                            CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &note_count, notes);
        const int64_t k = std::clamp<int64_t>(note_count, 0, CUDNN_NUMERICAL_NOTE_TYPE_COUNT);
        const bool nondeterministic = std::find(notes, notes + k, CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) != notes + k;
        if (deterministic && nondeterministic) {
            *tried += fmt::format(" engine {} is nondeterministic;", index);
            continue;
        }
        cudnnBackendDescriptor_t plan = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        if (m_device)
            set(plan, CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &m_device);
        else
            set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &m_handle);
        set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &configs[size_t(i)]);
        if (const cudnnStatus_t s = m_api.finalize(plan); s != CUDNN_STATUS_SUCCESS) {
            *tried += fmt::format(" engine {}: {};", index, m_api.describe(s));
            continue;
        }
        check(m_api.get_attribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, workspace),
              "reading the plan's workspace size");
        *engine_note = fmt::format("engine {}{}", index, nondeterministic ? " (nondeterministic)" : "");
        return plan;
    }
    if (count == 0) *tried += fmt::format(" heuristics mode {} offered no engine;", int(mode));
    return nullptr;
}

cudnnBackendDescriptor_t CudnnGraph::build_plan(bool deterministic, std::string* engine_note, int64_t* workspace) {
    m_graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    set(m_graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(m_ops.size()), m_ops.data());
    if (m_handle) set(m_graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &m_handle);
    finalize(m_graph, "operation graph");
    std::string tried;
    for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
        try {
            if (cudnnBackendDescriptor_t plan = plan_from(mode, deterministic, &tried, engine_note, workspace))
                return plan;
        } catch (const CudnnFailure& e) {  // one mode's heuristics failing leaves the other to try
            tried += fmt::format(" heuristics mode {}: {};", int(mode), e.what());
        }
    }
    throw CudnnFailure("no engine of this cuDNN finalizes the graph:" + tried);
}

}  // namespace us::cuda
#endif
