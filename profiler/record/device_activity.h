// From CUPTI's activity records to trace records, without CUDA: the CUPTI glue (cupti_collector.cpp) copies the
// fields it needs into the plain structs below, so that this layer builds everywhere and is tested on a CPU.
//
// Out come: a span per kernel, memcpy and memset on the device lane (NCCL kernels on device_comm), on its stream
// and at the times the GPU ran it, attributed to the op, layer, micro-batch and step that launched it; a wait span
// on the host lane per host thread blocked on the GPU; counters for device memory reserved through cudaMalloc,
// CUPTI's overhead and the records CUPTI lost.
//
// Attribution: CUPTI gives every API call a correlation id and hands the kernel it launched the same id; an
// ExternalCorrelation record maps the call to the external id that was on top of the launching thread's stack
// (pushed around each op: CorrelationTable); that id names the op. Records arrive in buffers that CUPTI completes
// in no guaranteed order, so device work whose call is not mapped yet waits one more emit() before it goes out
// unattributed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "profiler/event.h"
#include "profiler/record/correlation_table.h"
#include "profiler/record/gpu_clock_map.h"
#include "profiler/record/kernel_names.h"

namespace us::prof {

// ---- CUPTI's records in plain form. Times are CUPTI timestamps (ns); start = end = 0 means CUPTI could not time
// the work (such records are counted and left out).

struct KernelActivity {
    uint64_t start = 0, end = 0;
    uint32_t context = 0, stream = 0;
    uint32_t correlation = 0;  // of the API call that launched it
    std::string_view name;     // as CUPTI reports it (mangled or not); read during add() only
};

enum class MemcpyDirection : uint8_t { other, host_to_device, device_to_host, device_to_device, host_to_host, peer };

struct MemcpyActivity {
    uint64_t start = 0, end = 0, bytes = 0;
    uint32_t context = 0, stream = 0;
    uint32_t correlation = 0;          // of the driver call that issued it
    uint32_t runtime_correlation = 0;  // of the runtime call, when it came through the runtime
    MemcpyDirection direction = MemcpyDirection::other;
};

struct MemsetActivity {
    uint64_t start = 0, end = 0, bytes = 0;
    uint32_t context = 0, stream = 0;
    uint32_t correlation = 0;
};

// An API call made while an external id was pushed on its thread.
struct ExternalCorrelation {
    uint64_t external_id = 0;
    uint32_t correlation = 0;
};

// A cudaMalloc / cudaFree (by the caching allocator, cuBLAS, NCCL ...).
struct MemoryActivity {
    uint64_t time = 0, address = 0, bytes = 0;
    bool allocation = true;  // false: a release
    bool device = true;      // device memory; pinned host and managed memory are left out
    uint32_t correlation = 0;
};

// Time CUPTI or the driver spent instrumenting (flushing buffers, ...).
struct OverheadActivity {
    uint64_t start = 0, end = 0;
};

// A host thread blocked until the GPU caught up.
enum class SyncKind : uint8_t { event, stream, context };
struct SyncActivity {
    uint64_t start = 0, end = 0;
    SyncKind kind = SyncKind::stream;
    uint32_t correlation = 0;
};

struct DeviceActivityStats {
    uint64_t kernels = 0, nccl_kernels = 0, memcpys = 0, memsets = 0, syncs = 0;
    uint64_t attributed = 0;    // device work tied to the op that launched it
    uint64_t unattributed = 0;  // launched outside any op, or its op's entry was overwritten before it arrived
    uint64_t untimed = 0;       // records CUPTI could not time (left out)
    uint64_t allocations = 0, releases = 0;
    uint64_t unknown_releases = 0;  // frees of memory allocated before the collector started (not subtracted)
    uint64_t dropped = 0;           // records CUPTI lost
    double overhead_ms = 0;
};

// One per process, used by one thread (the collector's worker). Names are interned with string_id().
class DeviceActivityTranslator {
public:
    // `ops` and `clock` are read at every add()/emit(); the call-to-op map keeps the last
    // `correlation_capacity_pow2` API calls (16 bytes each).
    DeviceActivityTranslator(const CorrelationTable& ops, const GpuClockMap& clock,
                             uint32_t correlation_capacity_pow2 = 1u << 19);

    void add(const KernelActivity& k);
    void add(const MemcpyActivity& m);
    void add(const MemsetActivity& m);
    void add(const ExternalCorrelation& c);
    void add(const MemoryActivity& m);
    void add(const OverheadActivity& o);
    void add(const SyncActivity& s);
    // Records CUPTI lost, noticed at CUPTI time `at`.
    void add_dropped(uint64_t count, uint64_t at);

    // Appends the records ready to go (CLOCK_MONOTONIC ns). Device work whose API call has no external correlation
    // yet waits for the next call, once; `final` lets nothing wait.
    void emit(std::vector<EventRecord>& out, bool final);

    const DeviceActivityStats& stats() const { return m_stats; }
    size_t waiting() const { return m_pending.size(); }
    // The (context, CUPTI stream id) of each stream slot, in order of first use: what the thread field of a
    // device span refers to.
    const std::vector<std::pair<uint32_t, uint32_t>>& streams() const { return m_streams; }

private:
    struct Pending {
        EventRecord record;
        uint32_t correlation[2];  // API calls to look the op up by (0: none)
        uint8_t rounds;           // emit() calls it has waited through
        bool device_work;         // a kernel, memcpy or memset (counted as attributed or not)
        bool nccl;
    };
    struct KernelInfo {
        uint32_t name;
        KernelClass kind;
    };
    struct NameHash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    struct CallToOp {
        uint32_t correlation = 0;
        uint64_t external_id = 0;  // 0: empty
    };

    bool timed(uint64_t start, uint64_t end);
    uint8_t stream_slot(uint32_t context, uint32_t stream);
    void add_span(Lane lane, SpanKind kind, OpClass op, uint32_t name, uint64_t start, uint64_t end, uint64_t bytes,
                  uint8_t thread, uint32_t correlation, uint32_t runtime_correlation, bool device_work, bool nccl);
    void add_counter(uint32_t name, double value, uint64_t at, uint32_t correlation);
    uint64_t external_id_of(uint32_t correlation) const;
    bool attribute(Pending& p) const;  // fills the op's fields in; false when the op is not known (yet)

    const CorrelationTable& m_ops;
    const GpuClockMap& m_clock;
    std::vector<CallToOp> m_calls;  // by correlation & mask
    uint32_t m_calls_mask;
    std::vector<Pending> m_pending, m_waiting;  // m_waiting: scratch for emit(), kept for its capacity
    std::unordered_map<std::string, KernelInfo, NameHash, std::equal_to<>> m_kernels;
    std::vector<std::pair<uint32_t, uint32_t>> m_streams;
    std::unordered_map<uint64_t, uint64_t> m_live;  // device allocations by address: bytes (cudaMalloc is rare)
    int64_t m_reserved = 0;
    double m_overhead_ms = 0;
    uint64_t m_dropped = 0;
    DeviceActivityStats m_stats;
    uint32_t m_memcpy_names[6], m_memset_name, m_sync_names[3];
    uint32_t m_reserved_name, m_overhead_name, m_dropped_name;
};

}  // namespace us::prof
