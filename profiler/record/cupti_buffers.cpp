// CUPTI's activity buffers (cupti_buffers.h).
#include "profiler/record/cupti_buffers.h"

#include <cstdlib>

namespace us::prof {

BufferPool& cupti_buffer_pool() {
    static BufferPool* p = new BufferPool;  // never destroyed: CUPTI may call back during exit
    return *p;
}

void CUPTIAPI on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    BufferPool& p = cupti_buffer_pool();
    std::lock_guard lock(p.mutex);
    *max_records = 0;  // as many as fit
    *size = p.buffer_bytes;
    *buffer = nullptr;  // declined: CUPTI drops records and counts them
    if (!p.free.empty()) {
        *buffer = p.free.back();
        p.free.pop_back();
    } else if (p.allocated < p.max_buffers) {
        *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, p.buffer_bytes));  // CUPTI wants 8-byte alignment
        if (*buffer) ++p.allocated;
    }
}

void CUPTIAPI on_buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size, size_t valid) {
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) != CUPTI_SUCCESS) dropped = 0;
    BufferPool& p = cupti_buffer_pool();
    {
        std::lock_guard lock(p.mutex);
        p.completed.push_back({buffer, valid, dropped});
    }
    p.ready.notify_one();
}

}  // namespace us::prof
