// The trace store: every rank's spans, memory events and counters on one time base, read through const
// accessors by the analysis, the exporters and the views (nothing downstream writes to it).
//
// Spans are kept per rank and lane, sorted by begin time, each with a row: rows are assigned first-fit in
// (begin, longest first) order, so a span nested in another lands one row below it and overlapping transfers on
// the comm lane spread over rows; within a row spans never overlap, so a view finds the visible ones by binary
// search. Memory is bounded (docs/trace-format.md): past `max_bytes`, op-level spans (the GPU's kernels among them)
// and memory events are dropped and counted while steps, phases, layers, communication and counters are kept.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "profiler/event.h"
#include "profiler/transport/chunk.h"
#include "profiler/transport/rank_metadata.h"

namespace us::prof {

struct Span {
    int64_t begin = 0;  // ns on the trace's time base
    int64_t end = 0;
    uint64_t bytes = 0;
    uint64_t flops = 0;
    uint32_t name = 0;      // TraceStore::name()
    uint32_t launcher = 0;  // device lanes: TraceStore::name() of the CPU op that launched it; 0 (the empty name) none
    uint32_t launch_lead = 0;  // device lanes: begin - its launch call's begin, ns, + 1; 0 unknown (SpanRecord's)
    int32_t step = 0;
    int16_t micro_batch = -1;
    int16_t layer = -1;
    int16_t peer = -1;
    SpanKind kind = SpanKind::op;
    OpClass op = OpClass::none;
    Phase phase = Phase::none;
    uint8_t chunk = 0;
    uint8_t group = 0;
    uint8_t thread = 0;  // the recording thread's slot; on the device lanes, the stream's
    uint8_t row = 0;
    int64_t duration() const { return end - begin; }
};
static_assert(sizeof(Span) == 64, "a span is one cache line: millions are held (docs/performance.md)");

class LaneTrack {
public:
    const std::vector<Span>& spans() const { return m_spans; }
    int rows() const { return int(m_rows.size()); }
    // Indices into spans() of row r, in time order (spans of a row never overlap).
    const std::vector<uint32_t>& row(int r) const { return m_rows[size_t(r)]; }
    // The [first, last) positions within row r whose spans intersect [t0, t1).
    std::pair<size_t, size_t> visible(int r, int64_t t0, int64_t t1) const;
    int64_t first_begin() const { return m_spans.empty() ? 0 : m_spans.front().begin; }
    int64_t last_end() const { return m_last_end; }
    int64_t max_duration() const { return m_max_duration; }
    // With rows by thread, every row holds the spans of one recording thread (on the device lanes: one stream), so
    // the timeline can draw a sub-lane per thread or stream; the thread of row r.
    bool rows_by_thread() const { return m_by_thread; }
    uint8_t row_thread(int r) const { return m_row_thread[size_t(r)] < 0 ? 0 : uint8_t(m_row_thread[size_t(r)]); }
    // Chosen before the first span arrives (device lanes always; every lane of an imported trace).
    void set_rows_by_thread(bool on) { m_by_thread = on; }

    void append(const Span& s);  // pending until finalize()
    // Every span's name and launcher through `ids` (old name id -> new), for a rank moved between stores.
    void rename(const std::vector<uint32_t>& ids);
    void finalize();  // sorts and assigns rows; cheap when nothing is pending
    bool dirty() const { return !m_pending.empty(); }

private:
    void assign_rows(size_t from);

    std::vector<Span> m_spans;
    std::vector<Span> m_pending;
    std::vector<std::vector<uint32_t>> m_rows;
    std::vector<int16_t> m_row_thread;  // per row: its thread when rows are by thread, -1 for a free row
    bool m_by_thread = false;
    int64_t m_last_end = 0;
    int64_t m_max_duration = 0;
};

struct MemoryPoint {
    int64_t t = 0;
    int64_t delta = 0;
    int64_t category_bytes = 0;  // the category's bytes after this event
    int64_t total_bytes = 0;
    uint32_t label = 0;
    int32_t step = 0;
    int16_t micro_batch = -1;
    int16_t layer = -1;
    uint8_t category = 0;
    Phase phase = Phase::none;
};

struct CounterPoint {
    int64_t t = 0;
    double value = 0;
    int32_t step = 0;
};

struct RankTrace {
    int rank = 0;
    RankMetadata info;          // its metadata record, read through its type (set_metadata)
    bool has_metadata = false;  // a non-empty record arrived
    LaneTrack lanes[size_t(Lane::count)];
    std::vector<MemoryPoint> memory;                         // in time order
    std::map<uint32_t, std::vector<CounterPoint>> counters;  // by name id
    bool ended = false;                                      // an end chunk arrived
    bool clean = false;                                      // ... and it said the run ended normally
    bool lost = false;                                       // the stream broke before its end
    std::string lost_reason;
    std::string end_reason;       // why an unclean end happened, in the rank's words (a stop signal, a lost listener)
    uint64_t dropped_events = 0;  // the rank could not record (full buffers, unreachable listener)
    uint64_t chunks = 0;
    int64_t clock_offset_ns = 0;                   // subtracted from this rank's timestamps (metadata clock.offset_ns)
    std::unordered_map<uint32_t, uint32_t> names;  // the rank's string ids -> store names
    std::string flight_dump;  // the rank's last Flight Recorder dump (flight_writer.h pickle bytes), empty when none

    // The GPU's own record of its work (CUPTI) is in the trace: the device lanes, not the engine's op and
    // collective spans, then say when the rank computed and communicated.
    bool has_device_spans() const {
        return !lanes[size_t(Lane::device)].spans().empty() || !lanes[size_t(Lane::device_comm)].spans().empty();
    }
    // Read from another framework's files (a PyTorch profiler trace: metadata source "kineto"), not recorded by
    // the engine: no settings, no predictions.
    bool imported() const { return info.imported(); }
    // The rank's metadata record, read once through RankMetadata's deserializer (the JSON is not kept: every key a
    // writer writes is one of the type's).
    void set_metadata(const nlohmann::json& j) {
        info = rank_metadata_from_json(j);
        has_metadata = !j.empty();
    }
    // The lane whose op spans are the rank's compute: device on a traced GPU, compute otherwise.
    Lane work_lane() const { return has_device_spans() ? Lane::device : Lane::compute; }
};

// The store's memory cap (docs/trace-format.md): past `max_bytes` of spans, memory events and counters, op spans
// and memory events are no longer kept (counted, and said on screen and in the report); steps, phases, layers,
// communication spans and counters always are. The trace file keeps everything regardless.
struct TraceStoreOptions {
    size_t max_bytes = size_t(2) << 30;
};

class TraceStore {
public:
    // Name id 0 is the empty name: a span's `launcher` 0 says "none".
    explicit TraceStore(TraceStoreOptions options = {}) : m_options(options) { intern(std::string()); }

    // Ingestion (from a file reader or a listener).
    void add_chunk(const Chunk& chunk);
    void mark_lost(int rank, const std::string& reason);
    void finalize();  // sorts pending spans; call before reading after ingestion
    // Moves every rank of `from` (filled and finalized elsewhere: a file read on a worker thread) into this store,
    // its names interned here, its counts and cap figures added; `from` is left empty. A rank this store already
    // has is refused (UserError, before anything moves). Costs a pass over the moved spans, no sort.
    void merge(TraceStore&& from);

    // Reading.
    int rank_count() const { return int(m_ranks.size()); }
    const RankTrace* rank(int r) const;  // nullptr when the rank never reported
    std::vector<int> ranks() const;
    const std::string& name(uint32_t id) const { return m_names[id]; }
    uint32_t find_name(const std::string& text) const;  // UINT32_MAX when unknown
    // The latest value of a counter on the lowest rank that reports it (with that rank), if any rank does.
    std::optional<std::pair<int, CounterPoint>> latest_counter(const std::string& name) const;
    int64_t origin() const;    // earliest timestamp, ns
    int64_t end_time() const;  // latest timestamp, ns
    size_t span_count() const { return m_span_count; }
    // What the kept events take (the vectors' elements; a few percent more with the row index and names).
    size_t bytes_used() const { return m_bytes; }
    uint64_t spans_dropped_by_cap() const { return m_spans_dropped; }
    uint64_t memory_events_dropped_by_cap() const { return m_memory_dropped; }
    // The first step whose op spans or memory events the cap dropped (0: none).
    int cap_reached_at_step() const { return m_cap_step; }
    // The cap was reached: here, or in a rank's own store before it was merged (each rank of a run opened a rank at a
    // time has a share of the cap), which dropped something.
    bool at_cap() const { return m_bytes >= m_options.max_bytes || m_spans_dropped + m_memory_dropped > 0; }
    uint64_t version() const { return m_version; }  // changes whenever the content changes
    const TraceStoreOptions& options() const { return m_options; }
    // The first rank's metadata (the run's config is the same on every rank).
    const RankMetadata& run_rank_metadata() const;
    // A planner's prediction written as a trace (app/plan/predicted_trace.h), not a run: its metadata says
    // "predicted", and every figure read from it is the model's.
    bool is_prediction() const { return run_rank_metadata().predicted.has_value(); }
    const char* provenance() const { return is_prediction() ? "predicted" : "measured"; }
    // A run imported from another framework's files (RankTrace::imported of its first rank).
    bool is_imported() const { return run_rank_metadata().imported(); }
    int world_size() const;  // from metadata, else the number of ranks seen

private:
    RankTrace& rank_for(int r);
    uint32_t intern(const std::string& text);
    // add_chunk's steps: a metadata record, an end-of-stream note, and one event of each kind.
    void add_metadata(RankTrace& rt, const Chunk& c);
    void add_end(RankTrace& rt, const Chunk& c);
    void add_span(RankTrace& rt, const SpanRecord& r);
    void add_memory(RankTrace& rt, const MemoryRecord& r);
    uint32_t local_name(RankTrace& rt, uint32_t local);  // the rank's string id as a store name ("?" when unknown)

    TraceStoreOptions m_options;
    std::vector<std::unique_ptr<RankTrace>> m_ranks;  // by rank; null for ranks not seen
    std::vector<std::string> m_names;
    std::unordered_map<std::string, uint32_t> m_name_index;
    size_t m_span_count = 0;
    size_t m_bytes = 0;
    uint64_t m_spans_dropped = 0, m_memory_dropped = 0;
    int m_cap_step = 0;
    uint64_t m_version = 0;
};

// Reads a whole trace file (or the parts of an unfinished one) into a store. Warnings (a truncated tail, unmerged
// parts) are returned; errors throw UserError.
std::vector<std::string> load_trace(const std::string& path, TraceStore& store);

}  // namespace us::prof
