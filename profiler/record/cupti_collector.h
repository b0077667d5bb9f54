// The CUPTI collector: what the GPU executed, with GPU timing, into the trace. It enables CUPTI's Activity API
// (kernels, memcpy, memset, device memory, synchronization, runtime and driver calls, external correlation,
// overhead), hands completed buffers to a worker thread that translates them (device_activity.h) and records them
// (record_external_events), flushes CUPTI every `flush_ms` so that the live view stays current, and pushes an
// external correlation id around every op (OpHooks) so that each kernel is attributed to its op, layer and
// micro-batch. docs/gpu-profiling.md explains it.
//
// Built only with CUDA (target us_profiler_cupti, which defines US_HAVE_CUPTI=1); this header has no CUDA include.
// Start it after start_recording() and stop it before stop_recording().
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "profiler/record/device_activity.h"

namespace us::prof {

struct CuptiOptions {
    int flush_ms = 150;                     // how often CUPTI is asked for completed buffers (live view latency)
    size_t buffer_bytes = size_t(4) << 20;  // per activity buffer
    int max_buffers = 32;                   // at most this much memory in buffers; beyond it CUPTI drops (counted)
};

struct CuptiStatus {
    bool running = false;
    // One line. Running: what is traced. Failed: what happened and what it means ("... kernel-level spans are off;
    // engine-side spans carry on").
    std::string message;
};

// What the collector saw, for the rank's metadata.
struct CuptiSummary {
    CuptiStatus status;
    DeviceActivityStats stats;
    std::vector<std::pair<uint32_t, uint32_t>> streams;  // (context, CUPTI stream id) of each device span slot
    int64_t clock_offset_ns = 0;                         // host - CUPTI clock at the last sample
};

// Starts collecting for this process. Never throws: without a GPU or driver, with another CUPTI client attached
// (Nsight Systems, Nsight Compute, cuda-gdb) or without the permission to trace, it returns running = false and
// the message says so. A second call while running returns the running status.
CuptiStatus start_cupti_collector(const CuptiOptions& options = {});

// Delivers everything CUPTI still holds into the trace and stops. `synchronize_device` first waits for the work
// queued on the calling thread's device (pass false when ending on an error: the GPU may be stuck).
void stop_cupti_collector(bool synchronize_device);

// The status and the statistics so far (or of the last run once stopped).
CuptiSummary cupti_summary();

}  // namespace us::prof
