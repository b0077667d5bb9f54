// The common part of the engine's NCCL operations (nccl_launch.h).
#include "engine/comm/nccl_launch.h"

#include "engine/backend/cuda/cuda_check.h"
#include "profiler/record/recorder.h"

namespace us::nccl {

ncclDataType_t type_of(DType t) { return t == DType::bf16 ? ncclBfloat16 : t == DType::i32 ? ncclInt32 : ncclFloat32; }

// The GPU-side window of one operation, seen from the host clock by two host callbacks on its stream.
struct SpanTiming {
    int64_t begin = 0;
    prof::RecordContext context;
    prof::OpClass op = prof::OpClass::none;
    uint32_t name = 0;  // string id
    uint64_t bytes = 0;
    int16_t peer = -1;
    uint8_t group = 0;
};

namespace {

void CUDART_CB span_begin(void* p) { static_cast<SpanTiming*>(p)->begin = prof::read_ticks(); }

void CUDART_CB span_end(void* p) {
    auto* t = static_cast<SpanTiming*>(p);
    if (prof::enabled()) {
        prof::context() = t->context;  // the callback thread records for the step, micro-batch and layer of the launch
        prof::record_span(prof::Lane::comm, prof::SpanKind::comm, t->op, t->name, t->begin, prof::read_ticks(), 0,
                          t->bytes, t->peer, t->group);
    }
    delete t;
}

class NcclRequest final : public CommRequest {
public:
    NcclRequest(cudaEvent_t done, cudaStream_t compute) : m_done(done), m_compute(compute) {}
    ~NcclRequest() override { cudaEventDestroy(m_done); }
    bool test() override {
        const cudaError_t e = cudaEventQuery(m_done);
        if (e == cudaErrorNotReady) return false;
        US_CUDA_CHECK(e);
        return true;
    }
    // Device-side: later compute waits for the operation; the host goes on.
    void wait() override { US_CUDA_CHECK(cudaStreamWaitEvent(m_compute, m_done, 0)); }

private:
    cudaEvent_t m_done;
    cudaStream_t m_compute;
};

}  // namespace

Opened open_operation(const OperationStreams& s, prof::OpClass op, const char* name, size_t bytes, int16_t peer) {
    cudaEvent_t ready = nullptr;
    US_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    US_CUDA_CHECK(cudaEventRecord(ready, s.compute));
    US_CUDA_CHECK(cudaStreamWaitEvent(s.stream, ready, 0));
    US_CUDA_CHECK(cudaEventDestroy(ready));  // released once the wait has been satisfied
    Opened opened;
    // interned once, only when recording; a caller's name for the operation (e.g. "reduce_from_tp_region") wins
    const uint32_t caller_name = prof::context().op_name;
    opened.name_id = !prof::enabled() ? 0 : caller_name != UINT32_MAX ? caller_name : prof::string_id(name);
    if (prof::enabled()) {
        opened.timing = new SpanTiming{0, prof::context(), op, opened.name_id, bytes, peer, uint8_t(s.group)};
        US_CUDA_CHECK(cudaLaunchHostFunc(s.stream, span_begin, opened.timing));
    }
    return opened;
}

CommHandle close_operation(const OperationStreams& s, const Opened& opened) {
    if (opened.timing) US_CUDA_CHECK(cudaLaunchHostFunc(s.stream, span_end, opened.timing));
    cudaEvent_t done = nullptr;
    US_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    US_CUDA_CHECK(cudaEventRecord(done, s.stream));
    return std::make_shared<NcclRequest>(done, s.compute);
}

}  // namespace us::nccl
