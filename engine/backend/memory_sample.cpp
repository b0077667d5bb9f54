#include "engine/backend/memory_sample.h"

#include "engine/backend/backend.h"
#include "common/core/process_memory.h"
#include "profiler/record/recorder.h"

namespace us {

void record_memory_sample(Backend& backend) {
    if (!prof::enabled()) return;
    static const uint32_t resident = prof::string_id(prof::kProcessResidentCounter);
    static const uint32_t heap = prof::string_id(prof::kProcessHeapCounter);
    static const uint32_t tracked = prof::string_id(prof::kTrackedCounter);
    static const uint32_t device = prof::string_id(prof::kDeviceUsedCounter);
    static const uint32_t reserved = prof::string_id(prof::kReservedCounter);
    const ProcessMemory p = read_process_memory();
    const int64_t used = backend.device_used_bytes();
    const MemoryStats stats = backend.allocator().stats();
    prof::record_counter(tracked, double(stats.total_current));
    prof::record_counter(reserved, double(stats.reserved));
    if (p.resident_bytes >= 0) prof::record_counter(resident, double(p.resident_bytes));
    if (p.heap_bytes >= 0) prof::record_counter(heap, double(p.heap_bytes));
    if (used >= 0) prof::record_counter(device, double(used));
}

}  // namespace us
