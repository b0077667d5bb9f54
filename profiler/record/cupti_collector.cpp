// The CUPTI collector: enabling the activity kinds, the worker that flushes and translates CUPTI's buffers
// (cupti_buffers.h) record by record (cupti_records.h), the op correlation hooks and the clock samples. Everything
// CUPTI calls back into lives in statics that are never destroyed: CUPTI may call them during process exit, after
// the collector object is gone.
#include "profiler/record/cupti_collector.h"

#include <cuda_runtime_api.h>
#include <cupti.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>

#include "profiler/record/clock.h"
#include "profiler/record/cupti_buffers.h"
#include "profiler/record/cupti_records.h"
#include "profiler/record/recorder.h"

namespace us::prof {

namespace {

// ---- errors

std::string cupti_error(CUptiResult r) {
    const char* text = nullptr;
    if (cuptiGetResultString(r, &text) != CUPTI_SUCCESS || !text) return "CUPTI error " + std::to_string(int(r));
    return text;
}

// What a failure means for the user, after CUPTI's own words.
std::string failure_message(const std::string& what, CUptiResult r) {
    std::string why;
    switch (r) {
        case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
            why = ": another CUPTI client (Nsight Systems, Nsight Compute, cuda-gdb or another profiler) is attached";
            break;
        case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
        case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
            why = ": the driver does not let this user trace the GPU";
            break;
        case CUPTI_ERROR_NOT_INITIALIZED:
        case CUPTI_ERROR_NOT_COMPATIBLE:
            why = ": no usable GPU driver (CUPTI needs a driver at least as new as the CUDA toolkit)";
            break;
        default:
            break;
    }
    return "CUPTI: " + what + " failed (" + cupti_error(r) + why +
           "): kernel-level spans are off; engine-side spans carry on";
}

// ---- op correlation (the OpHooks): an external id per op, pushed for CUPTI to attach to the op's API calls

CorrelationTable& op_table() {
    static CorrelationTable* t = new CorrelationTable;  // hooks may still run while the process exits
    return *t;
}

void op_enter(const OpTag& tag) {
    cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, op_table().open(tag));
}

void op_exit() {
    uint64_t id = 0;
    cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id);
}

constexpr OpHooks kOpHooks{&op_enter, &op_exit};

// CUPTI's timestamps on the trace's clock: CUPTI then maps GPU time to CLOCK_MONOTONIC itself, and the clock map
// only confirms it (its offset stays 0).
uint64_t CUPTIAPI monotonic_timestamp() { return uint64_t(monotonic_ns()); }

// ---- the collector

// The kinds enabled, in order; only the first is required.
struct KindToEnable {
    CUpti_ActivityKind kind;
    const char* name;
};
constexpr KindToEnable kKinds[] = {
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "kernels"},
    {CUPTI_ACTIVITY_KIND_MEMCPY, "memcpy"},
    {CUPTI_ACTIVITY_KIND_MEMSET, "memset"},
    {CUPTI_ACTIVITY_KIND_MEMORY2, "device memory"},
    {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "synchronization"},
    // External correlation records exist only for recorded API calls: runtime calls for our own kernels, driver
    // calls for libraries that launch through the driver (cuBLASLt, NCCL).
    {CUPTI_ACTIVITY_KIND_RUNTIME, "runtime calls"},
    {CUPTI_ACTIVITY_KIND_DRIVER, "driver calls"},
    {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "op correlation"},
    {CUPTI_ACTIVITY_KIND_OVERHEAD, "overhead"},
};

class CuptiCollector {
public:
    explicit CuptiCollector(const CuptiOptions& options) : m_options(options), m_translator(op_table(), m_clock) {}

    CuptiStatus start() {
        uint32_t version = 0;
        if (CUptiResult r = cuptiGetVersion(&version); r != CUPTI_SUCCESS) return fail("cuptiGetVersion", r);
        if (version < CUPTI_API_VERSION)
            return {false, "CUPTI: libcupti is older (API version " + std::to_string(version) +
                               ") than the headers of " + "this build (" + std::to_string(CUPTI_API_VERSION) +
                               "), so its records would be misread: kernel-level spans are off; engine-side spans "
                               "carry on"};
        int devices = 0;
        if (cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0)
            return {false, std::string("CUPTI: no CUDA device visible (") +
                               (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices") +
                               "): kernel-level spans are off; engine-side spans carry on"};
        {
            BufferPool& p = cupti_buffer_pool();
            std::lock_guard lock(p.mutex);
            p.buffer_bytes = (m_options.buffer_bytes + 7) / 8 * 8;
            p.max_buffers = m_options.max_buffers;
            p.stopping = false;
            for (const CompletedBuffer& b : p.completed) p.free.push_back(b.data);  // from an earlier run
            p.completed.clear();
        }
        // Before any kind is enabled, so that every record uses it. Failing that, the clock map converts.
        m_own_clock = cuptiActivityRegisterTimestampCallback(&monotonic_timestamp) == CUPTI_SUCCESS;
        if (CUptiResult r = cuptiActivityRegisterCallbacks(&on_buffer_requested, &on_buffer_completed);
            r != CUPTI_SUCCESS)
            return fail("cuptiActivityRegisterCallbacks", r);
        std::string traced, missing;
        for (const KindToEnable& k : kKinds) {
            const CUptiResult r = cuptiActivityEnable(k.kind);
            if (r == CUPTI_SUCCESS) {
                m_enabled.push_back(k.kind);
                traced += (traced.empty() ? "" : ", ") + std::string(k.name);
            } else if (k.kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
                return fail("enabling kernel activity", r);
            } else {
                missing += (missing.empty() ? "" : ", ") + std::string(k.name) + " (" + cupti_error(r) + ")";
            }
        }
        sample_clock();
        m_worker = std::thread([this] { loop(); });
        install_op_hooks(&kOpHooks);
        m_status = {true, "CUPTI " + std::to_string(version) + ": tracing " + traced +
                              (missing.empty() ? "" : "; without " + missing) +
                              (m_own_clock ? "" : "; timestamps mapped from CUPTI's clock")};
        return m_status;
    }

    void stop(bool synchronize_device) {
        install_op_hooks(nullptr);
        if (synchronize_device) cudaDeviceSynchronize();  // its kernels complete, so their records can be delivered
        {
            BufferPool& p = cupti_buffer_pool();
            std::lock_guard lock(p.mutex);
            p.stopping = true;
        }
        cupti_buffer_pool().ready.notify_all();
        m_worker.join();
        // Alone now: deliver what CUPTI holds, complete or not, and translate the rest here.
        cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        for (auto it = m_enabled.rbegin(); it != m_enabled.rend(); ++it) cuptiActivityDisable(*it);
        m_enabled.clear();
        sample_clock();
        translate_completed();
        emit(true);
    }

    const CuptiStatus& status() const { return m_status; }
    // Any thread: what the worker published at its last emit.
    CuptiSummary summary() const {
        std::lock_guard lock(m_summary_mutex);
        CuptiSummary s = m_published;
        s.status = m_status;
        return s;
    }

private:
    CuptiStatus fail(const std::string& what, CUptiResult r) {
        for (CUpti_ActivityKind k : m_enabled) cuptiActivityDisable(k);
        m_enabled.clear();
        m_status = {false, failure_message(what, r)};
        return m_status;
    }

    // A (CUPTI, CLOCK_MONOTONIC) pair, the host time being the midpoint of two reads around CUPTI's.
    void sample_clock() {
        uint64_t gpu = 0;
        const int64_t before = monotonic_ns();
        if (cuptiGetTimestamp(&gpu) != CUPTI_SUCCESS) return;
        const int64_t after = monotonic_ns();
        m_clock.add_sample(gpu, before + (after - before) / 2);
    }

    void loop() {
        using clock = std::chrono::steady_clock;
        const auto period = std::chrono::milliseconds(m_options.flush_ms);
        auto next_flush = clock::now() + period;
        BufferPool& p = cupti_buffer_pool();
        for (;;) {
            {
                std::unique_lock lock(p.mutex);
                p.ready.wait_until(lock, next_flush, [&] { return p.stopping || !p.completed.empty(); });
                if (p.stopping) break;  // stop() delivers and translates the rest
            }
            const bool tick = clock::now() >= next_flush;
            if (tick) {
                sample_clock();
                cuptiActivityFlushAll(0);  // completed buffers come back through on_buffer_completed, here
                next_flush = clock::now() + period;
            }
            translate_completed();
            if (tick) emit(false);
        }
    }

    void translate_completed() {
        BufferPool& p = cupti_buffer_pool();
        {
            std::lock_guard lock(p.mutex);
            m_work.swap(p.completed);
        }
        for (const CompletedBuffer& b : m_work) {
            if (b.dropped > 0) {
                uint64_t now = 0;
                cuptiGetTimestamp(&now);
                m_translator.add_dropped(b.dropped, now);
                add_dropped_events(b.dropped);
            }
            translate_buffer(b.data, b.valid);
        }
        std::lock_guard lock(p.mutex);
        for (const CompletedBuffer& b : m_work) p.free.push_back(b.data);
        m_work.clear();
    }

    void translate_buffer(uint8_t* data, size_t valid) {
        CUpti_Activity* record = nullptr;
        while (cuptiActivityGetNextRecord(data, valid, &record) == CUPTI_SUCCESS)
            translate_cupti_record(record, m_translator);
    }

    void emit(bool final) {
        m_translator.emit(m_out, final);
        record_external_events(m_out.data(), m_out.size());
        m_out.clear();
        std::lock_guard lock(m_summary_mutex);
        m_published.stats = m_translator.stats();
        m_published.streams = m_translator.streams();
        m_published.clock_offset_ns = m_clock.offset_ns();
    }

    CuptiOptions m_options;
    GpuClockMap m_clock;
    DeviceActivityTranslator m_translator;
    std::vector<CUpti_ActivityKind> m_enabled;
    std::vector<CompletedBuffer> m_work;  // the worker's (or, once stopped, the caller's) scratch
    std::vector<EventRecord> m_out;
    std::thread m_worker;
    CuptiStatus m_status;  // written by start() only
    mutable std::mutex m_summary_mutex;
    CuptiSummary m_published;
    bool m_own_clock = false;
};

std::mutex g_mutex;
std::unique_ptr<CuptiCollector> g_collector;  // while running
CuptiSummary g_last;                          // of the last collector, once stopped (or failed)

}  // namespace

CuptiStatus start_cupti_collector(const CuptiOptions& options) {
    std::lock_guard lock(g_mutex);
    if (g_collector) return g_collector->status();
    auto collector = std::make_unique<CuptiCollector>(options);
    const CuptiStatus status = collector->start();
    if (status.running)
        g_collector = std::move(collector);
    else
        g_last = {status, {}, {}, 0};
    return status;
}

void stop_cupti_collector(bool synchronize_device) {
    std::lock_guard lock(g_mutex);
    if (!g_collector) return;
    g_collector->stop(synchronize_device);
    g_last = g_collector->summary();
    g_last.status.running = false;
    g_collector.reset();
}

CuptiSummary cupti_summary() {
    std::lock_guard lock(g_mutex);
    return g_collector ? g_collector->summary() : g_last;
}

}  // namespace us::prof
