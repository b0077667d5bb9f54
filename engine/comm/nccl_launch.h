// What every NCCL operation of the engine does around its enqueue (nccl_comm.cpp's collectives, nccl_pipe_comm.cpp's
// pipeline channels): the operation's stream first waits for the work launched on the compute stream so far (so it
// sees what backward wrote), two host callbacks on that stream bracket its GPU execution as a comm span, CUPTI ties
// its kernels to the span by the external correlation id pushed around the enqueue, and its handle holds an event
// after it: test() polls the event, wait() makes the compute stream wait for it (the host never blocks).
#pragma once

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include "common/core/check.h"
#include "engine/comm/communicator.h"
#include "profiler/record/zones.h"

#define US_NCCL_CHECK(call)                                                                              \
    do {                                                                                                 \
        const ncclResult_t us_nccl_result = (call);                                                      \
        if (us_nccl_result != ncclSuccess) [[unlikely]]                                                  \
            ::us::assertion_failed(#call, __FILE__, __LINE__,                                            \
                                   ::fmt::format("NCCL error: {}", ncclGetErrorString(us_nccl_result))); \
    } while (0)

namespace us::nccl {

ncclDataType_t type_of(DType t);

// Where an operation runs: the stream it is enqueued on, after the compute stream; its group's kind for the span.
struct OperationStreams {
    cudaStream_t compute = nullptr, stream = nullptr;
    GroupKind group{};
};

struct SpanTiming;

// The halves of launch(): the stream's wait on compute and the opening callback; the closing one and the handle.
struct Opened {
    SpanTiming* timing = nullptr;
    uint32_t name_id = 0;
};
Opened open_operation(const OperationStreams& s, prof::OpClass op, const char* name, size_t bytes, int16_t peer);
CommHandle close_operation(const OperationStreams& s, const Opened& opened);

template <typename Enqueue>
CommHandle launch(const OperationStreams& s, prof::OpClass op, const char* name, size_t bytes, int16_t peer,
                  Enqueue&& enqueue) {
    const Opened opened = open_operation(s, op, name, bytes, peer);
    {
        US_PROF_DEVICE_OP(op, opened.name_id);
        enqueue();
    }
    return close_operation(s, opened);
}

}  // namespace us::nccl
