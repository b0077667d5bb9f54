// CUPTI's activity records into plain structs (cupti_records.h).
#include "profiler/record/cupti_records.h"

#include <cstdlib>
#include <string_view>

namespace us::prof {

namespace {

MemcpyDirection direction_of(uint8_t copy_kind) {
    switch (copy_kind) {
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
            return MemcpyDirection::host_to_device;
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
            return MemcpyDirection::device_to_host;
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
            return MemcpyDirection::device_to_device;
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
            return MemcpyDirection::host_to_host;
        case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
            return MemcpyDirection::peer;
        default:
            return MemcpyDirection::other;
    }
}

}  // namespace

void translate_cupti_record(const CUpti_Activity* record, DeviceActivityTranslator& translator) {
    switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
            const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
            translator.add(KernelActivity{k->start, k->end, k->contextId, k->streamId, k->correlationId,
                                          k->name ? std::string_view(k->name) : std::string_view("unknown kernel")});
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
            translator.add(MemcpyActivity{m->start, m->end, m->bytes, m->contextId, m->streamId, m->correlationId,
                                          m->runtimeCorrelationId, direction_of(m->copyKind)});
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
            translator.add(MemsetActivity{m->start, m->end, m->bytes, m->contextId, m->streamId, m->correlationId});
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMORY2: {
            const auto* m = reinterpret_cast<const CUpti_ActivityMemory4*>(record);
            if (m->memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION &&
                m->memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
                break;
            translator.add(MemoryActivity{m->timestamp, m->address, m->bytes,
                                          m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
                                          m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, m->correlationId});
            break;
        }
        case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
            const auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
            SyncKind kind;
            switch (s->type) {
                case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
                    kind = SyncKind::event;
                    break;
                case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
                    kind = SyncKind::stream;
                    break;
                case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
                    kind = SyncKind::context;
                    break;
                default:
                    return;  // a stream waiting on an event does not block the host
            }
            translator.add(SyncActivity{s->start, s->end, kind, s->correlationId});
            break;
        }
        case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
            const auto* c = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
            if (c->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
                translator.add(ExternalCorrelation{c->externalId, c->correlationId});
            break;
        }
        case CUPTI_ACTIVITY_KIND_OVERHEAD: {
            const auto* o = reinterpret_cast<const CUpti_ActivityOverhead3*>(record);
            translator.add(OverheadActivity{o->start, o->end});
            std::free(o->overheadData);  // the client owns it (cupti_activity.h)
            break;
        }
        default:
            break;  // runtime and driver calls: only their external correlation records are used
    }
}

}  // namespace us::prof
