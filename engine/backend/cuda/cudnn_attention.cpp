// cuDNN's fused flash attention for one rank's whole causal sequence (cudnn_attention.h). The graphs are the
// composite ones cuDNN's fused-attention engines recognise (cuDNN's attention documentation; NVIDIA's
// cudnn-frontend builds the same for its SDPA node): forward S = QKᵀ·scale, the causal mask as a select on
// row >= column, the softmax with its log-sum-exp written as "stats", O = PV; backward from those stats:
// dV = PᵀdO, dP = dO Vᵀ, dS = P(dP - rowsum(dO∘O))·scale, dK = dSᵀQ, dQ = dS K.
#include "engine/backend/cuda/cudnn_attention.h"

#if ULTRASCOPE_HAVE_CUDNN_HEADERS
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>
#include <vector>

#include "common/core/check.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cudnn_graph.h"
#include "engine/backend/cuda/cudnn_sdpa_graph.h"
#include "engine/backend/cuda/cudnn_sdpa_layout.h"

namespace us::cuda {

namespace {

constexpr size_t kAlign = 256;
size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Bytes of the tensors with memory that the backward graph keeps beyond its inputs: the row sums, and the fp32
// dq accumulator when it is not deterministic.
size_t row_dot_bytes(const SdpaShape& s) { return aligned(size_t(s.B) * s.NH * s.T * 4); }
size_t accum_bytes(const SdpaShape& s) { return aligned(size_t(s.B) * s.NH * s.T * s.HD * 4); }

}  // namespace

struct CudnnAttention::Plan {
    std::unique_ptr<CudnnGraph> graph;
    cudnnBackendDescriptor_t plan = nullptr;
    int64_t workspace = 0;
    std::string why_not;  // empty with a plan
    std::string engine;
};

CudnnAttention::CudnnAttention(cudaStream_t stream, TrackedAllocator& allocator, const std::string& library)
    : m_api(load_cudnn(library)), m_stream(stream), m_allocator(allocator) {
    const char* nondeterministic = std::getenv("ULTRASCOPE_CUDNN_NONDETERMINISTIC");
    m_deterministic = !(nondeterministic && std::string(nondeterministic) == "1");
    if (const cudnnStatus_t st = m_api.create(&m_handle); st != CUDNN_STATUS_SUCCESS)
        fail_user("cuDNN {} ({}) could not make a handle on this GPU: {}. Use --attention flash", m_api.version_text(),
                  m_api.path, m_api.describe(st));
    if (const cudnnStatus_t st = m_api.set_stream(m_handle, m_stream); st != CUDNN_STATUS_SUCCESS)
        fail_user("cuDNN could not take the compute stream: {}", m_api.describe(st));
}

CudnnAttention::~CudnnAttention() {
    m_plans.clear();  // the plans' descriptors before the handle they were made with
    if (m_handle) m_api.destroy(m_handle);
}

std::string CudnnAttention::describe() const {
    return fmt::format("cuDNN {} fused attention (graph API, {}), {} backward", m_api.version_text(), m_api.path,
                       m_deterministic ? "deterministic" : "nondeterministic");
}

CudnnAttention::Plan& CudnnAttention::plan(const SdpaShape& s, bool backward) {
    std::unique_ptr<Plan>& slot = m_plans[{s, backward}];
    if (slot) return *slot;
    slot = std::make_unique<Plan>();
    slot->graph = std::make_unique<CudnnGraph>(m_api, m_handle);
    try {
        if (backward)
            sdpa_backward_graph(*slot->graph, s, m_deterministic);
        else
            sdpa_forward_graph(*slot->graph, s);
        slot->plan = slot->graph->build_plan(backward && m_deterministic, &slot->engine, &slot->workspace);
    } catch (const CudnnFailure& e) {
        slot->why_not = e.what();
        slot->graph.reset();  // nothing of a failed graph is kept but its message
    }
    return *slot;
}

const std::string& CudnnAttention::prepare(const SdpaShape& s, bool backward) { return plan(s, backward).why_not; }

namespace {

// One execution: the variant pack names every tensor with memory (device pointers) or a value (host pointers).
void execute(const CudnnApi& api, cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
             const std::vector<std::pair<int64_t, void*>>& bindings, void* workspace, const char* what) {
    std::vector<int64_t> uids;
    std::vector<void*> pointers;
    for (const auto& [uid, p] : bindings) uids.push_back(uid), pointers.push_back(p);
    cudnnBackendDescriptor_t pack = nullptr;
    cudnnStatus_t st = api.create_descriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
    if (st == CUDNN_STATUS_SUCCESS)
        st = api.set_attribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, int64_t(uids.size()),
                               uids.data());
    if (st == CUDNN_STATUS_SUCCESS)
        st = api.set_attribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                               int64_t(pointers.size()), pointers.data());
    if (st == CUDNN_STATUS_SUCCESS)
        st = api.set_attribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
    if (st == CUDNN_STATUS_SUCCESS) st = api.finalize(pack);
    if (st == CUDNN_STATUS_SUCCESS) st = api.execute(handle, plan, pack);
    if (pack) api.destroy_descriptor(pack);
    if (st != CUDNN_STATUS_SUCCESS)
        fail_user("cuDNN's fused attention {} failed: {}. Use --attention flash", what, api.describe(st));
}

void* at(const void* base, int64_t elements) {
    return const_cast<char*>(static_cast<const char*>(base)) + elements * 2;  // bf16
}

}  // namespace

void CudnnAttention::forward(const SdpaShape& s, const void* qkv, void* out, float* lse) {
    Plan& p = plan(s, false);
    US_ASSERT(p.plan, "cuDNN attention forward without a plan: {}", p.why_not);
    const SdpaLayout l = sdpa_layout(s.B, s.T, s.NH, s.HD);
    // Host values the pack points at; cuDNN reads them when it executes (before this returns).
    float scale = 1.0f / std::sqrt(float(s.HD));
    float mask_value = m_api.version < 91000 ? std::numeric_limits<float>::lowest()  // older cuDNN's preference
                                             : -std::numeric_limits<float>::infinity();
    const Allocation work = m_allocator.allocate(aligned(size_t(std::max<int64_t>(p.workspace, 1))),
                                                 MemCategory::workspace, "cuDNN attention workspace");
    execute(m_api, m_handle, p.plan,
            {{kQ, at(qkv, l.q.offset)},
             {kK, at(qkv, l.k_t.offset)},
             {kV, at(qkv, l.v.offset)},
             {kO, out},
             {kStats, lse},
             {kScale, &scale},
             {kMaskValue, &mask_value}},
            work.data(), "forward");
}

void CudnnAttention::backward(const SdpaShape& s, const void* qkv, const void* out, const void* dout, const float* lse,
                              void* dqkv) {
    Plan& p = plan(s, true);
    US_ASSERT(p.plan, "cuDNN attention backward without a plan: {}", p.why_not);
    const SdpaLayout l = sdpa_layout(s.B, s.T, s.NH, s.HD);
    float scale = 1.0f / std::sqrt(float(s.HD)), one = 1.0f;
    float mask_value =
        m_api.version < 91000 ? std::numeric_limits<float>::lowest() : -std::numeric_limits<float>::infinity();
    const size_t own = row_dot_bytes(s) + (m_deterministic ? 0 : accum_bytes(s));
    const Allocation work = m_allocator.allocate(own + aligned(size_t(std::max<int64_t>(p.workspace, 1))),
                                                 MemCategory::workspace, "cuDNN attention workspace");
    char* base = static_cast<char*>(work.data());
    std::vector<std::pair<int64_t, void*>> bindings = {{kQ, at(qkv, l.q.offset)},
                                                       {kK, at(qkv, l.k_t.offset)},
                                                       {kV, at(qkv, l.v_t.offset)},
                                                       {kO, const_cast<void*>(out)},
                                                       {kDO, const_cast<void*>(dout)},
                                                       {kStats, const_cast<float*>(lse)},
                                                       {kDQ, at(dqkv, l.q.offset)},
                                                       {kDK, at(dqkv, l.k.offset)},
                                                       {kDV, at(dqkv, l.v.offset)},
                                                       {kRowDot, base},
                                                       {kScale, &scale},
                                                       {kMaskValue, &mask_value},
                                                       {kOne, &one}};
    if (!m_deterministic) {
        // cuDNN before 9.6 expected the accumulator zeroed by its caller; zeroing it always costs little.
        US_CUDA_CHECK(cudaMemsetAsync(base + row_dot_bytes(s), 0, accum_bytes(s), m_stream));
        bindings.emplace_back(kDQAccum, base + row_dot_bytes(s));
    }
    execute(m_api, m_handle, p.plan, bindings, base + own, "backward");
}

}  // namespace us::cuda
#endif
