// CUPTI's activity buffers: a bounded pool CUPTI takes buffers from, and the queue of completed ones waiting for
// the collector's worker. The pool lives in a static that is never destroyed: CUPTI may call back during process
// exit, after the collector is gone. CUDA builds only (target us_profiler_cupti).
#pragma once

#include <cupti.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace us::prof {

struct CompletedBuffer {
    uint8_t* data;
    size_t valid;
    size_t dropped;  // records CUPTI lost, as it reported when completing this buffer
};

struct BufferPool {
    std::mutex mutex;
    std::condition_variable ready;  // a buffer completed, or the worker should stop
    std::vector<uint8_t*> free;
    std::vector<CompletedBuffer> completed;
    size_t buffer_bytes = size_t(4) << 20;
    int allocated = 0, max_buffers = 32;
    bool stopping = false;
};

BufferPool& cupti_buffer_pool();

// The callbacks cuptiActivityRegisterCallbacks takes: hand CUPTI a buffer from the pool (or decline, and CUPTI
// drops records and counts them), and queue a completed one for the worker.
void CUPTIAPI on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records);
void CUPTIAPI on_buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size, size_t valid);

}  // namespace us::prof
