// The recorder: each thread of a rank appends fixed-size records to its own ring (no lock, two clock reads per
// span); a collector thread drains the rings every few milliseconds, converts ticks to nanoseconds and hands
// batches to the sinks (a trace file, a live TCP stream). Recording is off until start(); the zone macros in
// zones.h check one global flag and compile to nothing when ULTRASCOPE_PROFILE is off. Device activity (CUPTI)
// arrives through record_external_events and ties GPU work to ops through the op hooks.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/event.h"
#include "profiler/record/clock.h"
#include "profiler/record/ring.h"

namespace us::prof {

// What the current thread is doing, copied into every record it makes.
struct RecordContext {
    int32_t step = 0;
    int16_t micro_batch = -1;
    int16_t layer = -1;
    Phase phase = Phase::none;
    uint8_t chunk = 0;
    uint32_t op_name = UINT32_MAX;  // a caller's name for the next ops (e.g. "c_attn dW"); else the op's own
};

// What the GPU work launched inside an op is attributed to: the op and where the training loop was.
struct OpTag {
    uint32_t name = 0;  // string id of the op's span name
    int32_t step = 0;
    int16_t micro_batch = -1;
    int16_t layer = -1;
    OpClass op = OpClass::none;
    Phase phase = Phase::none;
    uint8_t chunk = 0;
};

// Called around every op (op zones and the profiled backend's op spans) while a device-activity collector (CUPTI)
// is attached, so that it can correlate the GPU work an op launches with the op. `exit` is called on the thread
// that called `enter`, in LIFO order. Without a collector the pointer is null: an op pays one relaxed load.
struct OpHooks {
    void (*enter)(const OpTag& tag);
    void (*exit)();
};

namespace detail {
extern std::atomic<bool> g_enabled;
extern std::atomic<const OpHooks*> g_op_hooks;
EventRing& thread_ring();
uint8_t thread_slot();
RecordContext& thread_context();
}  // namespace detail

inline bool enabled() { return detail::g_enabled.load(std::memory_order_relaxed); }
inline RecordContext& context() { return detail::thread_context(); }

// The attached collector's hooks, or null. `hooks` must outlive every op that may still be running.
inline const OpHooks* op_hooks() { return detail::g_op_hooks.load(std::memory_order_relaxed); }
void install_op_hooks(const OpHooks* hooks);
// The tag of an op started now on this thread.
inline OpTag current_op_tag(OpClass op, uint32_t name) {
    const RecordContext& c = detail::thread_context();
    return {name, c.step, c.micro_batch, c.layer, op, c.phase, c.chunk};
}

// Interned names: the id is stable for the process, the text is sent once per sink.
uint32_t string_id(std::string_view text);

struct RecorderOptions {
    int flush_ms = 50;
};

// Starts recording into the sinks; metadata (JSON) is written to each sink first.
void start_recording(std::vector<std::unique_ptr<EventSink>> sinks, const std::string& metadata_json,
                     const RecorderOptions& options = {});
// Drains what is left, finishes the sinks and stops the collector. Safe to call when not recording.
void stop_recording(bool clean, const std::string& reason = {});
// Replaces the metadata (sent again to every sink: consumers keep the latest).
void update_metadata(const std::string& metadata_json);
// Sends the rank's Flight Recorder dump (its pickle bytes) to every sink, after the events drained so far. Any
// thread; nothing when not recording.
void record_flight_dump(const std::string& pickle);
uint64_t dropped_events();

// ---- records from collectors with a clock of their own (CUPTI's activity records): complete records whose
// times are CLOCK_MONOTONIC nanoseconds already, queued for the next drain (at most kMaxExternalEvents waiting:
// beyond that they are dropped and counted). Any thread; takes a lock once per call, so pass batches.
inline constexpr size_t kMaxExternalEvents = size_t(1) << 20;
void record_external_events(const EventRecord* events, size_t count);
// Adds events a collector lost on its side (CUPTI's dropped records) to the rank's dropped count.
void add_dropped_events(uint64_t count);

// ---- the hot path (callers check enabled() first; the macros do)
inline void record_span(Lane lane, SpanKind kind, OpClass op, uint32_t name, int64_t begin_ticks, int64_t end_ticks,
                        uint64_t flops = 0, uint64_t bytes = 0, int16_t peer = -1, uint8_t group = 0) {
    EventRing& ring = detail::thread_ring();
    EventRecord* r = ring.begin_write();
    if (!r) return;
    const RecordContext& c = detail::thread_context();
    SpanRecord& s = r->span;
    s.begin_ns = begin_ticks;  // ticks until the collector converts them
    s.end_ns = end_ticks;
    s.bytes = bytes;
    s.flops = flops;
    s.name = name;
    s.step = c.step;
    s.micro_batch = c.micro_batch;
    s.layer = c.layer;
    s.peer = peer;
    s.launcher = 0;  // ring slots are reused: no stale bytes in the fields
    s.launch_lead = 0;
    s.type = uint8_t(EventType::span);
    s.lane = uint8_t(lane);
    s.kind = uint8_t(kind);
    s.phase = uint8_t(c.phase);
    s.op = uint8_t(op);
    s.group = group;
    s.chunk = c.chunk;
    s.thread = detail::thread_slot();
    ring.end_write();
}

void record_memory(int64_t delta_bytes, uint8_t category, int64_t category_bytes, int64_t total_bytes, uint32_t label);
void record_counter(uint32_t name, double value);

}  // namespace us::prof
