// Pass two of the Kineto reader (kineto_reader.h). With the context worked out first (kineto_span_context.h: steps,
// each host span's enclosing CPU op, phase and collective, kernels' launches by `correlation`), every span is written
// as a SpanRecord into chunks the store ingests (under its memory cap), then steps, memory counters and metadata.
#include "profiler/import/kineto_reader.h"

#include <algorithm>
#include <fmt/format.h>

#include "common/core/check.h"
#include "profiler/import/kineto_groups.h"
#include "profiler/import/kineto_names.h"
#include "profiler/import/kineto_span_context.h"
#include "profiler/trace/run_info.h"
#include "profiler/trace/kineto_counters.h"

namespace us::prof {

int rank_in_file(const KinetoFile& f) {
    const auto& d = f.distributed_info;
    if (d.is_object() && d.contains("rank") && d["rank"].is_number_integer()) return d["rank"].get<int>();
    return -1;
}

int rank_of_file(const KinetoFile& f, bool only_file, std::string& rank_from, std::string& warning) {
    int rank = rank_in_file(f);
    rank_from = "distributedInfo";
    if (rank < 0) {
        rank = rank_from_file_name(f.path);
        if (rank < 0 && only_file) {  // torch.profiler without torch.distributed: one process, rank 0 (as HTA takes)
            rank_from = "single file";
            warning = fmt::format(
                "{}: no distributedInfo.rank and no rank in its name: taken as rank 0, a "
                "single-process trace",
                f.path);
            return 0;
        }
        US_CHECK_INPUT(rank >= 0,
                       "'{}' does not say its rank (no distributedInfo.rank; record with torch.distributed "
                       "initialized) and its name has no rank-R, rankR or rank_R: rename it to say its rank (a "
                       "single file without one is read as rank 0)",
                       f.path);
        rank_from = "file name";
        warning = fmt::format("{}: no distributedInfo.rank: rank {} taken from the file name", f.path, rank);
    }
    US_CHECK_INPUT(rank < 100000, "'{}' says it is rank {}, out of range", f.path, rank);
    return rank;
}

namespace {

// Names the mapping adds to the file's own, with ids after them.
enum ExtraName : uint32_t { window_step, optimizer_step, allocated, reserved, cpu_allocated, extra_count };
constexpr const char* kExtraNames[] = {"profiled window", "step (to the end of Optimizer.step)",
                                       kKinetoAllocatedCounter, kKinetoReservedCounter, kKinetoCpuAllocatedCounter};

class ChunkWriter {
public:
    ChunkWriter(TraceStore& store, int rank, const KinetoFile& f) : m_store(store), m_rank(rank), m_file(f) {}
    uint32_t extra(ExtraName n) const { return uint32_t(m_file.names.size()) + n; }
    void add(const EventRecord& e) {
        m_chunk.events.push_back(e);
        if (m_chunk.events.size() >= 65536) flush();
    }
    void flush() {
        if (!m_strings_sent) {  // the names travel once, with the first chunk (id 0, the empty name, is "none")
            for (uint32_t id = 1; id < m_file.names.size(); ++id) m_chunk.strings.push_back({id, m_file.names[id]});
            for (uint32_t n = 0; n < extra_count; ++n) m_chunk.strings.push_back({extra(ExtraName(n)), kExtraNames[n]});
            m_strings_sent = true;
        }
        m_chunk.kind = ChunkKind::events;
        m_chunk.rank = uint32_t(m_rank);
        m_store.add_chunk(m_chunk);
        m_chunk.events.clear();
        m_chunk.strings.clear();
    }

private:
    TraceStore& m_store;
    int m_rank;
    const KinetoFile& m_file;
    Chunk m_chunk;
    bool m_strings_sent = false;
};

// How one span becomes a SpanRecord: host spans by their walk's context, device spans by their launch's.
class SpanMapper {
public:
    SpanMapper(const KinetoFile& f, int rank, const KinetoSteps& steps, const std::vector<NameFacts>& facts,
               const HostWalk& walk, const KinetoGroups& groups)
        : m_file(f),
          m_rank(rank),
          m_steps(steps),
          m_facts(facts),
          m_walk(walk),
          m_groups(groups),
          m_class_of_name(f.names.size(), -1) {
        m_has_gpu = std::any_of(f.spans.begin(), f.spans.end(), [](auto& s) { return is_device_cat(s.cat); });
        // A collective's bytes are counted once: on its c10d op, or where no c10d op says any (DDP's buckets go as a
        // TensorList, which says no shape) on gloo's own spans, whose shapes are the buffer's.
        // The c10d ops' bytes are their nests' (a gloo span on the same thread inside one gives it its bytes).
        uint64_t c10d_bytes = 0, gloo_bytes = 0;
        for (const uint32_t i : walk.host) {
            if (walk.ctx[i].collective != int32_t(i)) continue;  // outermost collectives only
            (facts[f.spans[i].name].gloo ? gloo_bytes : c10d_bytes) += walk.nest[i].bytes;
        }
        m_bytes_on_gloo = c10d_bytes == 0 && gloo_bytes > 0;
    }
    // The device streams in first-seen order.
    const std::vector<int64_t>& streams() const { return m_streams; }

    // Span i's record, whichever side it ran on (not called for steps).
    EventRecord record(uint32_t i) {
        const KinetoSpan& s = m_file.spans[i];
        EventRecord e{};
        SpanRecord& r = e.span;
        r.type = uint8_t(EventType::span);
        r.begin_ns = s.begin, r.end_ns = s.end;
        r.name = s.name;
        r.micro_batch = -1, r.layer = -1, r.peer = -1;
        if (!is_device_cat(s.cat))
            host_span(i, r);
        else
            device_span(i, r);
        return e;
    }

private:
    const KinetoFile& m_file;
    int m_rank;
    const KinetoSteps& m_steps;
    const std::vector<NameFacts>& m_facts;
    const HostWalk& m_walk;
    const KinetoGroups& m_groups;
    bool m_has_gpu = false;
    bool m_bytes_on_gloo = false;  // the rank's c10d ops carry no bytes, gloo's spans do: count them there
    std::vector<int64_t> m_streams;
    std::vector<int8_t> m_class_of_name;

    uint8_t group_id(int16_t g) const { return g < 0 ? 0 : m_groups.group_ids[size_t(g)]; }
    int16_t peer_of(const KinetoSpan& n) const {
        if (n.peer_src >= 0 && n.peer_src != m_rank) return n.peer_src;
        return n.peer_dst >= 0 && n.peer_dst != m_rank ? n.peer_dst : int16_t(-1);
    }
    // A stream's slot, in first-seen order.
    uint8_t stream_slot(int64_t stream) {
        auto it = std::find(m_streams.begin(), m_streams.end(), stream);
        if (it != m_streams.end()) return uint8_t(std::min<ptrdiff_t>(it - m_streams.begin(), 255));
        m_streams.push_back(stream);
        return uint8_t(std::min<size_t>(m_streams.size() - 1, 255));
    }
    // A name's op class, worked out once: the kinds' rule table is too slow to run on every event.
    uint8_t class_of(uint32_t name) {
        if (m_class_of_name[name] < 0) m_class_of_name[name] = int8_t(compute_class_of(m_file.names[name]));
        return uint8_t(m_class_of_name[name]);
    }

    // A host span: an op on its thread, or on a CPU-only rank a collective on the comm lanes.
    void host_span(uint32_t i, SpanRecord& r) {
        const KinetoSpan& s = m_file.spans[i];
        const NameFacts& facts = m_facts[s.name];
        const HostContext& c = m_walk.ctx[i];
        r.step = m_steps.step_of(s.begin);
        r.phase = uint8_t(c.phase == Phase::none && r.step > 0 ? Phase::forward : c.phase);
        r.thread = uint8_t(std::min<uint32_t>(s.thread, 255));
        r.kind = uint8_t(SpanKind::op);
        r.op = class_of(s.name);
        // Elementwise ops inside Optimizer.step (AdamW's add_, mul_, addcdiv_ per parameter) are the optimizer's.
        if (c.phase == Phase::optimizer && r.op == uint8_t(OpClass::activation)) r.op = uint8_t(OpClass::optimizer);
        // gloo's span of asynchronous work that outlives the c10d op which issued it: the transfer itself.
        const bool async_gloo = !m_has_gpu && c.collective >= 0 && c.collective != int32_t(i) && facts.gloo &&
                                s.end > m_file.spans[size_t(c.collective)].end;
        if (!m_has_gpu && (c.collective == int32_t(i) || async_gloo)) {  // a CPU-only rank's collective
            host_collective(c, facts, async_gloo, s.bytes, r);
        } else {
            // A CPU-only rank's compute is its cpu_ops; annotations (markers), ops inside or around a
            // collective and waits for one are its host side.
            const bool compute =
                !m_has_gpu && s.cat == KinetoCat::cpu_op && c.collective < 0 && !c.envelope && !facts.collective_wait;
            r.lane = uint8_t(compute ? Lane::compute : Lane::host);
        }
    }

    // A CPU-only rank's collective (its outermost c10d op, or gloo's asynchronous transfer): a comm span with the
    // nest's facts.
    void host_collective(const HostContext& c, const NameFacts& facts, bool async_gloo, uint64_t own_bytes,
                         SpanRecord& r) {
        KinetoSpan n = m_walk.nest[size_t(c.collective)];
        if (async_gloo) n.bytes = 0, n.collective = facts.op;
        // gloo's own span on its worker thread, outside any c10d op: the transfer's time; its bytes are
        // the launching c10d op's (counted there, not twice), unless no c10d op of the rank says any.
        if (facts.gloo) n.bytes = m_bytes_on_gloo ? own_bytes : 0;
        OpClass op = n.collective != OpClass::none ? n.collective : facts.op;
        r.kind = uint8_t(SpanKind::comm);
        r.op = uint8_t(op);
        r.bytes = n.bytes;
        r.group = group_id(n.group);
        const bool p2p = op == OpClass::send || op == OpClass::recv;
        r.lane = uint8_t(p2p ? Lane::p2p : Lane::comm);
        if (p2p) r.peer = peer_of(n);
    }

    // A device span on its stream, with the step, phase and CPU op of the call that launched it.
    void device_span(uint32_t i, SpanRecord& r) {
        const KinetoSpan& s = m_file.spans[i];
        const auto& spans = m_file.spans;
        const auto& launch_of = m_walk.launch_of;
        r.thread = stream_slot(s.stream);
        r.kind = uint8_t(SpanKind::op);
        r.lane = uint8_t(Lane::device);
        r.bytes = s.bytes;
        r.op = class_of(s.name);
        const auto launch = s.correlation >= 0 ? launch_of.find(s.correlation) : launch_of.end();
        const HostContext* c = launch != launch_of.end() ? &m_walk.ctx[launch->second] : nullptr;
        r.step = c ? m_steps.step_of(spans[launch->second].begin) : m_steps.step_of(s.begin);
        r.phase = uint8_t(c ? (c->phase == Phase::none && r.step > 0 ? Phase::forward : c->phase) : Phase::none);
        if (c && c->parent_op >= 0) r.launcher = spans[size_t(c->parent_op)].name;
        // The launch call itself, joined by the correlation id: its lead over the kernel (unknown when a
        // hostile file's times do not subtract).
        if (int64_t lead = 0; c && !__builtin_sub_overflow(s.begin, spans[launch->second].begin, &lead))
            r.launch_lead = lead < int64_t(UINT32_MAX) ? uint32_t(std::max<int64_t>(lead, 0) + 1) : 0;
        if (s.cat == KinetoCat::kernel && m_facts[s.name].nccl_kernel) nccl_kernel(s, c, r);
    }

    // An NCCL kernel: communication on the device, with its own args first, then its launching collective's.
    void nccl_kernel(const KinetoSpan& s, const HostContext* c, SpanRecord& r) {
        KinetoSpan n = s;
        if (c && c->collective >= 0) {
            const KinetoSpan& k = m_walk.nest[size_t(c->collective)];
            if (n.collective == OpClass::none) n.collective = k.collective;
            if (n.bytes == 0) n.bytes = k.bytes;
            if (n.group < 0) n.group = k.group;
            if (n.peer_src < 0 && n.peer_dst < 0) n.peer_src = k.peer_src, n.peer_dst = k.peer_dst;
        }
        OpClass op = m_facts[s.name].op;
        if (n.collective != OpClass::none && (op == OpClass::none || op == OpClass::send)) op = n.collective;
        r.lane = uint8_t(Lane::device_comm);
        r.kind = uint8_t(SpanKind::comm);
        r.op = uint8_t(op == OpClass::none ? OpClass::all_reduce : op);
        r.bytes = n.bytes;
        r.group = group_id(n.group);
        if (op == OpClass::send || op == OpClass::recv) r.peer = peer_of(n);
    }
};

// The steps as host spans of their own kind (the window step under its own name).
void write_steps(const KinetoSteps& steps, ChunkWriter& out) {
    for (const KinetoSpan& s : steps.steps) {
        EventRecord e{};
        SpanRecord& r = e.span;
        r.type = uint8_t(EventType::span);
        r.lane = uint8_t(Lane::host), r.kind = uint8_t(SpanKind::step);
        r.begin_ns = s.begin, r.end_ns = s.end, r.step = s.step + 1;
        r.name = steps.window ? out.extra(window_step) : steps.from_optimizer ? out.extra(optimizer_step) : s.name;
        r.micro_batch = -1, r.layer = -1, r.peer = -1;
        out.add(e);
    }
}

// The memory samples as counters: allocated (device or CPU) and, on the device, reserved.
void write_memory_counters(const KinetoFile& f, const KinetoSteps& steps, ChunkWriter& out) {
    for (const KinetoMemorySample& m : f.memory) {
        const std::pair<ExtraName, double> values[] = {{m.cpu ? cpu_allocated : allocated, m.allocated},
                                                       {reserved, m.reserved}};
        for (const auto& [name, value] : values) {
            if (m.cpu && name == reserved) continue;
            EventRecord e{};
            e.counter.type = uint8_t(EventType::counter);
            e.counter.t_ns = m.t;
            e.counter.value = value;
            e.counter.name = out.extra(name);
            e.counter.step = steps.step_of(m.t);
            out.add(e);
        }
    }
}

// What the metadata adds once the spans are written: the streams seen, the threads and HTA's stream rows.
void add_seen_to_metadata(const KinetoFile& f, const HostWalk& walk, const std::vector<int64_t>& streams,
                          RankMetadata& meta) {
    meta.stream_ids = streams;
    meta.thread_ids = nlohmann::json::array();  // the timeline labels a host sub-lane by its thread id
    for (const auto& [pid, tid] : f.threads) meta.thread_ids.push_back(tid);
    // The rows HTA counts as GPU time that we do not hold as device spans (KinetoFile::stream_rows), for HTA's
    // figures only, launch being the runtime call of the row's correlation id (unknown when the file has none), or
    // the row's own begin without a correlation.
    for (const KinetoSpan& s : f.stream_rows) {
        HtaStreamRow row{s.begin, s.end, s.stream, f.names[s.name], s.begin, s.correlation >= 0};
        if (s.correlation >= 0) {
            const auto call = walk.launch_of.find(s.correlation);
            row.launch =
                call == walk.launch_of.end() ? std::nullopt : std::optional<int64_t>(f.spans[call->second].begin);
        }
        meta.hta_stream_rows.push_back(std::move(row));
    }
}

// The rank's metadata, its last events and the end: a file is a whole recording, it ended cleanly.
void finish_rank(TraceStore& store, int rank, const RankMetadata& meta, ChunkWriter& out) {
    Chunk m;
    m.kind = ChunkKind::metadata;
    m.rank = uint32_t(rank);
    m.text = to_json(meta).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    store.add_chunk(m);
    out.flush();
    Chunk end;
    end.kind = ChunkKind::end;
    end.rank = uint32_t(rank);
    end.text = R"({"clean": true, "dropped_events": 0})";
    store.add_chunk(end);
}

// What the file held that the mapping leaves out or could not read, and the groups' own warnings.
void add_file_warnings(const KinetoFile& f, const KinetoGroups& groups, std::vector<std::string>& warnings) {
    if (f.python_functions)
        warnings.push_back(fmt::format("{}: {} python_function events dropped (Python stack frames are not mapped)",
                                       f.path, f.python_functions));
    if (!f.unknown_categories.empty()) {
        std::string list;
        uint64_t total = 0;
        for (const auto& [cat, n] : f.unknown_categories)
            list += fmt::format("{}{} {}", list.empty() ? "" : ", ", n, cat), total += n;
        warnings.push_back(fmt::format("{}: {} events of categories the mapping does not read were ignored ({})",
                                       f.path, total, list));
    }
    if (f.negative_durations)
        warnings.push_back(
            fmt::format("{}: {} events with a negative duration were skipped", f.path, f.negative_durations));
    if (f.bad_times)
        warnings.push_back(fmt::format("{}: {} events without a usable time were skipped", f.path, f.bad_times));
    for (const auto& w : groups.warnings) warnings.push_back(f.path + ": " + w);
}

}  // namespace

std::vector<std::string> ingest_kineto(const KinetoFile& f, int rank, const std::string& rank_from, TraceStore& store) {
    std::vector<std::string> warnings;
    const KinetoSteps steps = kineto_steps(f, warnings);
    const std::vector<NameFacts> facts = kineto_name_facts(f);
    const HostWalk walk = walk_host_spans(f, facts);
    const KinetoGroups groups = identify_groups(f, rank, kineto_p2p_groups(f, walk, facts));

    RankMetadata meta = kineto_rank_metadata(f, rank, rank_from, groups,
                                             steps.window           ? "window"
                                             : steps.from_optimizer ? "Optimizer.step"
                                                                    : "ProfilerStep");
    ChunkWriter out(store, rank, f);
    SpanMapper mapper(f, rank, steps, facts, walk, groups);
    for (uint32_t i = 0; i < f.spans.size(); ++i)
        if (f.spans[i].cat != KinetoCat::step) out.add(mapper.record(i));  // steps are written below
    write_steps(steps, out);
    write_memory_counters(f, steps, out);
    add_seen_to_metadata(f, walk, mapper.streams(), meta);
    finish_rank(store, rank, meta, out);
    add_file_warnings(f, groups, warnings);
    return warnings;
}

}  // namespace us::prof
