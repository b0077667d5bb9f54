// The event contract: the plain, fixed-size records every rank produces and every consumer reads, and the batch and
// sink types that carry them from the recorder to the transport. Nothing else is shared between the engine and the
// profiler, and the store and readers need nothing of the recorder. Records are 64 bytes, little-endian, and travel as
// they are (in compressed chunks) through files and sockets, so this layout is versioned with the trace format
// (docs/trace-format.md): change it only together with kTraceFormatVersion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace us::prof {

// Version 2 added the device lanes; readers accept every version from kOldestTraceFormatVersion on.
inline constexpr uint32_t kTraceFormatVersion = 2;
inline constexpr uint32_t kOldestTraceFormatVersion = 1;

// Where a span is drawn: one row per lane per rank in the timeline.
enum class Lane : uint8_t {
    host = 0,         // step markers; on a GPU also the host side of every op (its launch)
    compute = 1,      // phases, layers and (on a CPU) ops
    comm = 2,         // collectives (data-parallel buckets, ZeRO gathers), from launch to completion
    p2p = 3,          // pipeline sends and receives
    device = 4,       // work the GPU executed (kernels, memcpy, memset) on any stream, NCCL kernels aside; the
                      // span's thread field is the stream
    device_comm = 5,  // NCCL kernels as the GPU executed them, on their stream
    count = 6,
};
inline constexpr std::string_view kLaneNames[] = {"host", "compute", "comm", "p2p", "device", "device_comm"};
static_assert(std::size(kLaneNames) == size_t(Lane::count));

// Lanes a chunk of the given format version may use (version 1 predates the device lanes).
inline constexpr int lane_count_of_version(uint32_t version) { return version < 2 ? 4 : int(Lane::count); }

enum class Phase : uint8_t { none = 0, forward = 1, backward = 2, optimizer = 3, count = 4 };
inline constexpr std::string_view kPhaseNames[] = {"none", "forward", "backward", "optimizer"};

// What a span is. Container spans (step, phase, layer) nest; work spans are the leaves the analysis unions into
// the compute set; comm spans form the communication set; wait spans are time a thread spent blocked.
enum class SpanKind : uint8_t {
    step = 0,
    phase = 1,  // forward / backward / optimizer of one micro-batch (pipeline: F, B, W actions)
    layer = 2,
    op = 3,    // a unit of compute work: a GEMM, an attention, a norm ...
    comm = 4,  // a collective or point-to-point transfer, from launch to completion
    wait = 5,  // blocked on communication or a peer
    count = 6,
};
inline constexpr std::string_view kSpanKindNames[] = {"step", "phase", "layer", "op", "comm", "wait"};

// The class of an op span (for colouring and breakdowns) or the collective of a comm span.
enum class OpClass : uint8_t {
    none = 0,
    gemm,
    attention,
    norm,
    activation,  // GeLU, residual adds, copies
    embedding,
    loss,
    optimizer,
    all_reduce,
    reduce_scatter,
    all_gather,
    broadcast,
    send,
    recv,
    all_to_all,
    barrier,
    count,
};
inline constexpr std::string_view kOpClassNames[] = {
    "none",       "gemm",           "attention",  "norm",      "activation", "embedding", "loss",       "optimizer",
    "all_reduce", "reduce_scatter", "all_gather", "broadcast", "send",       "recv",      "all_to_all", "barrier"};

inline bool is_comm_op(OpClass c) { return c >= OpClass::all_reduce; }

// Process groups of comm spans (SpanRecord::group holds the kind's number). The engine's communicators are of these
// kinds (engine/comm/communicator.h); group ids from kGroupCount on name an imported run's own groups (run_info.h).
// edp: expert data parallelism, the ranks that hold the same experts (dp/ep of them, x cp).
enum class GroupKind : uint8_t { world, dp, pp, tp, cp, ep, embedding, edp };
struct GroupKindName {
    GroupKind kind;
    std::string_view name;  // a string literal: null-terminated
};
inline constexpr GroupKindName kGroupKinds[] = {{GroupKind::world, "world"},
                                                {GroupKind::dp, "dp"},
                                                {GroupKind::pp, "pp"},
                                                {GroupKind::tp, "tp"},
                                                {GroupKind::cp, "cp"},
                                                {GroupKind::ep, "ep"},
                                                {GroupKind::embedding, "embedding"},
                                                {GroupKind::edp, "edp"}};
inline constexpr int kGroupCount = int(std::size(kGroupKinds));
static_assert(
    [] {
        for (int g = 0; g < kGroupCount; ++g)
            if (int(kGroupKinds[g].kind) != g) return false;
        return true;
    }(),
    "kGroupKinds lists each kind at its own number, so that a group id indexes it");
constexpr std::string_view group_kind_name(GroupKind g) { return kGroupKinds[size_t(g)].name; }
// The kind a name says ("tp" -> GroupKind::tp), or nullopt for a name that is none of them.
constexpr std::optional<GroupKind> parse_group_kind(std::string_view name) {
    for (const GroupKindName& k : kGroupKinds)
        if (k.name == name) return k.kind;
    return std::nullopt;
}

enum class EventType : uint8_t { none = 0, span = 1, memory = 2, counter = 3 };

// Every record starts with its EventType byte, so the union's `type` reads it whatever the record is.
struct SpanRecord {
    uint8_t type;    // EventType::span
    uint8_t lane;    // Lane
    uint8_t kind;    // SpanKind
    uint8_t phase;   // Phase
    uint8_t op;      // OpClass
    uint8_t group;   // comm: process group id (0 world, 1 dp, 2 pp ...)
    uint8_t chunk;   // pipeline chunk (virtual stage) of the rank
    uint8_t thread;  // recording thread slot; on the device lanes, the stream (in order of first use)
    int64_t begin_ns;
    int64_t end_ns;
    uint64_t bytes;       // bytes moved (comm) or touched (ops, when known)
    uint64_t flops;       // floating-point operations (ops)
    uint32_t name;        // string id (names travel once, in the chunk's string table)
    int32_t step;         // 1-based optimizer step; 0 before the first
    int16_t micro_batch;  // -1: not tied to one
    int16_t layer;        // block index; -1 embedding/head/none
    int16_t peer;         // comm: peer rank (p2p) or -1
    uint8_t pad0[2];
    uint32_t launcher;  // device lanes: string id of the CPU op that launched the work; 0 none (zero padding in
                        // files written before the field, so writers never give a real name the id 0 here)
    // Device lanes: how long before begin_ns the launch call (cudaLaunchKernel ...) began, in ns, plus 1, where the
    // source links the two (Kineto's correlation id); 0 unknown (zero padding in files written before the field),
    // and for a lead past 4.29 s. A launch after its kernel (clocks a little apart) is kept as a lead of 0.
    uint32_t launch_lead;
};

struct MemoryRecord {
    uint8_t type;      // EventType::memory
    uint8_t category;  // us::MemCategory
    uint8_t phase;
    uint8_t pad0[5];
    int64_t t_ns;
    int64_t delta_bytes;     // + allocation, - free
    int64_t category_bytes;  // the category's current bytes after this event
    int64_t total_bytes;     // all categories' current bytes after this event
    uint32_t label;          // string id of the allocation's label
    int32_t step;
    int16_t micro_batch;
    int16_t layer;
    uint8_t pad[12];
};

// A named value over time: loss, lr, tokens/s, grad norm ...
struct CounterRecord {
    uint8_t type;  // EventType::counter
    uint8_t pad0[7];
    int64_t t_ns;
    double value;
    uint32_t name;  // string id
    int32_t step;
    uint8_t pad[32];
};

// Counters written by the CUPTI collector (docs/gpu-profiling.md), next to the trainer's (loss, lr, ...).
inline constexpr std::string_view kDeviceReservedCounter = "device_reserved_bytes";  // cudaMalloc'd, not yet freed
inline constexpr std::string_view kCuptiOverheadCounter = "cupti_overhead_ms";       // cumulative
inline constexpr std::string_view kCuptiDroppedCounter = "cupti_dropped_records";    // cumulative
// What the process holds beside what the tracked allocator counts, sampled together at phase boundaries and step
// ends (engine/backend/memory_sample.h): the difference is the "not tracked" band.
inline constexpr std::string_view kProcessResidentCounter = "process_resident_bytes";  // RSS (/proc/self/statm)
inline constexpr std::string_view kProcessHeapCounter = "process_heap_bytes";          // malloc'd (mallinfo2)
inline constexpr std::string_view kTrackedCounter = "tracked_bytes";                   // the allocator's live total
inline constexpr std::string_view kReservedCounter = "reserved_bytes";  // live + the freed blocks it keeps to reuse
inline constexpr std::string_view kDeviceUsedCounter = "device_used_bytes";  // cudaMemGetInfo: the device's
// The trainer's thread ready to run but waiting for a core, cumulative, at each step's end (engine/train/core_wait.h):
// what the machine's other load took from the rank.
inline constexpr std::string_view kRunQueueWaitCounter = "runqueue_wait_ms";
// The rank's OpenMP workers' waits (its compute's other threads; BLAS runs on the same pool), summed, cumulative, at
// each step's end, where it computes on more than one thread: the machine's load on the CPUs they run on.
inline constexpr std::string_view kWorkerRunQueueWaitCounter = "worker_runqueue_wait_ms";
// Their time on a core the same way: thread_cpu_ms the trainer thread's alone, worker_cpu_ms the workers' summed: a
// rank with more work is ready to run longer and waits longer on shared cores for the same share (blame weighs the
// waits by it).
inline constexpr std::string_view kThreadCpuCounter = "thread_cpu_ms";
inline constexpr std::string_view kWorkerCpuCounter = "worker_cpu_ms";

union EventRecord {
    uint8_t type;
    SpanRecord span;
    MemoryRecord memory;
    CounterRecord counter;
};

static_assert(sizeof(SpanRecord) == 64 && sizeof(MemoryRecord) == 64 && sizeof(CounterRecord) == 64);
static_assert(sizeof(EventRecord) == 64);
static_assert(offsetof(SpanRecord, type) == 0 && offsetof(MemoryRecord, type) == 0 &&
              offsetof(CounterRecord, type) == 0);

// ---- Plumbing: how records travel from the recorder to the transport (the sinks) and on to the readers.

struct StringDef {
    uint32_t id;
    std::string text;
};

struct EventBatch {
    std::vector<StringDef> strings;   // definitions not sent before
    std::vector<EventRecord> events;  // timestamps in CLOCK_MONOTONIC nanoseconds
    uint64_t dropped_total = 0;       // events this rank could not record so far
};

// Where batches go: implemented by the transport (file writer, TCP sender). Called on the collector thread.
class EventSink {
public:
    virtual ~EventSink() = default;
    virtual void write_metadata(const std::string& json) = 0;
    virtual void write_batch(const EventBatch& batch) = 0;
    // End of the stream; `clean` is false when the run is ending because of an error or a stop, which `reason`
    // (may be empty) says in words.
    virtual void finish(bool clean, uint64_t dropped_total, const std::string& reason = {}) = 0;
    // A Flight Recorder dump of the rank (profiler/flight/flight_writer.h's pickle bytes), kept by consumers as the
    // rank's latest. Sinks that do not carry dumps ignore it.
    virtual void write_flight_dump(const std::string& pickle) { (void)pickle; }
};

}  // namespace us::prof
