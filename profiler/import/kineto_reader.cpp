// Pass two of the Kineto reader (kineto_reader.h). Host spans are walked per thread in (begin, longest first) order
// with a stack, which gives each its enclosing CPU op, phase and collective; kernels find their launch through
// `correlation`; every span is then written as a SpanRecord into chunks the store ingests (under its memory cap).
#include "profiler/import/kineto_reader.h"

#include <algorithm>
#include <fmt/format.h>

#include "common/core/check.h"
#include "profiler/import/kineto_groups.h"
#include "profiler/import/kineto_names.h"
#include "profiler/trace/run_info.h"

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

// What the stack walk tells about a host span.
struct HostContext {
    int32_t parent_op = -1;   // innermost enclosing cpu_op (or user annotation), itself for a cpu_op
    int32_t collective = -1;  // the outermost collective op whose nest holds it
    Phase phase = Phase::none;
    bool envelope = false;  // encloses a collective (or a wait for one): not compute on a CPU-only rank
};

// Names the mapping adds to the file's own, with ids after them.
enum ExtraName : uint32_t { window_step, allocated, reserved, cpu_allocated, extra_count };
constexpr const char* kExtraNames[] = {"profiled window", "kineto_allocated_bytes", "kineto_reserved_bytes",
                                       "kineto_cpu_allocated_bytes"};

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

}  // namespace

std::vector<std::string> ingest_kineto(const KinetoFile& f, int rank, const std::string& rank_from, TraceStore& store) {
    std::vector<std::string> warnings;
    const auto& spans = f.spans;
    const bool has_gpu = std::any_of(spans.begin(), spans.end(), [](auto& s) { return is_device_cat(s.cat); });

    // Steps, in time order; none: one step over the whole window.
    std::vector<KinetoSpan> steps;
    int64_t t0 = INT64_MAX, t1 = INT64_MIN;
    for (const auto& s : spans) {
        if (s.cat == KinetoCat::step) steps.push_back(s);
        t0 = std::min(t0, s.begin), t1 = std::max(t1, s.end);
    }
    std::sort(steps.begin(), steps.end(), [](auto& a, auto& b) { return a.begin < b.begin; });
    const bool window = steps.empty();
    if (window && !spans.empty()) {
        KinetoSpan w;
        w.begin = t0, w.end = t1, w.cat = KinetoCat::step, w.step = 0;
        steps.push_back(w);
        warnings.push_back(
            fmt::format("{}: no ProfilerStep events (record with prof.step() each iteration): the "
                        "whole window is one step",
                        f.path));
    }
    auto step_of = [&](int64_t t) -> int32_t {  // the step whose window holds t (ours, 1-based), 0 for none
        auto it = std::upper_bound(steps.begin(), steps.end(), t, [](int64_t v, auto& s) { return v < s.begin; });
        if (it == steps.begin()) return 0;
        --it;
        return t < it->end || (it->begin == it->end && t == it->begin) ? it->step + 1 : 0;
    };

    // What a span's name says, worked out once a name rather than once a span (a rank repeats a few hundred names).
    struct NameFacts {
        bool collective_op = false, collective_wait = false, gloo = false, nccl_kernel = false;
        Phase phase = Phase::none;
        OpClass op = OpClass::none;
    };
    std::vector<NameFacts> name_facts(f.names.size());
    for (size_t n = 0; n < f.names.size(); ++n) {
        const std::string& name = f.names[n];
        name_facts[n] = {is_collective_op_name(name), is_collective_wait_name(name), name.rfind("gloo:", 0) == 0,
                         is_nccl_kernel_name(name),   phase_of_annotation(name),     collective_of(name)};
    }

    // The host stack walk, per thread.
    std::vector<uint32_t> host;
    for (uint32_t i = 0; i < spans.size(); ++i)
        if (!is_device_cat(spans[i].cat) && spans[i].cat != KinetoCat::step) host.push_back(i);
    std::sort(host.begin(), host.end(), [&](uint32_t a, uint32_t b) {
        const auto &x = spans[a], &y = spans[b];
        if (x.thread != y.thread) return x.thread < y.thread;
        return x.begin != y.begin ? x.begin < y.begin : x.end > y.end;
    });
    std::vector<HostContext> ctx(spans.size());
    std::vector<uint32_t> stack;
    for (size_t k = 0; k < host.size(); ++k) {
        const uint32_t i = host[k];
        const KinetoSpan& s = spans[i];
        if (k > 0 && spans[host[k - 1]].thread != s.thread) stack.clear();
        while (!stack.empty() && spans[stack.back()].end <= s.begin &&
               !(spans[stack.back()].end == s.begin && spans[stack.back()].begin == s.begin))
            stack.pop_back();
        HostContext c;
        if (!stack.empty()) c = ctx[stack.back()];
        c.envelope = false;
        const NameFacts& name = name_facts[s.name];
        if (s.cat == KinetoCat::cpu_op || (s.cat == KinetoCat::user_annotation && c.parent_op < 0))
            c.parent_op = int32_t(i);
        if (c.collective < 0 && name.collective_op) c.collective = int32_t(i);
        if (name.phase != Phase::none) c.phase = name.phase;
        ctx[i] = c;
        if (name.collective_op || name.collective_wait)  // its ancestors wrap communication
            for (size_t k = stack.size(); k-- > 0 && !ctx[stack[k]].envelope;) ctx[stack[k]].envelope = true;
        // gloo's spans of asynchronous work last until it completes and overlap what the thread does next: they
        // are nobody's parent.
        if (!name.gloo) stack.push_back(i);
    }
    // A collective nest's facts (collective, bytes, group, peers) gathered onto its outermost op.
    std::vector<KinetoSpan> nest(spans.size());
    for (uint32_t i : host) {
        const int32_t top = ctx[i].collective;
        if (top < 0) continue;
        KinetoSpan& n = nest[size_t(top)];
        const KinetoSpan& s = spans[i];
        if (n.collective == OpClass::none) n.collective = s.collective;
        n.bytes = std::max(n.bytes, s.bytes);
        if (n.group < 0) n.group = s.group;
        if (n.peer_src < 0 && n.peer_dst < 0) n.peer_src = s.peer_src, n.peer_dst = s.peer_dst;
    }
    std::unordered_map<int64_t, uint32_t> launch_of;  // correlation -> the runtime call
    for (uint32_t i : host)
        if ((spans[i].cat == KinetoCat::cuda_runtime || spans[i].cat == KinetoCat::cuda_driver) &&
            spans[i].correlation >= 0)
            launch_of.emplace(spans[i].correlation, i);

    // Groups that carry sends and receives (a pipeline's, when nothing else tells).
    std::vector<bool> p2p_groups(f.groups.size(), false);
    for (uint32_t i : host) {
        const KinetoSpan& s = spans[i];
        const OpClass op = s.collective != OpClass::none ? s.collective : name_facts[s.name].op;
        const int16_t g = ctx[i].collective >= 0 ? nest[size_t(ctx[i].collective)].group : s.group;
        if ((op == OpClass::send || op == OpClass::recv) && g >= 0) p2p_groups[size_t(g)] = true;
    }
    const KinetoGroups groups = identify_groups(f, rank, p2p_groups);
    auto group_id = [&](int16_t g) -> uint8_t { return g < 0 ? 0 : groups.group_ids[size_t(g)]; };
    auto peer_of = [&](const KinetoSpan& n) -> int16_t {
        if (n.peer_src >= 0 && n.peer_src != rank) return n.peer_src;
        return n.peer_dst >= 0 && n.peer_dst != rank ? n.peer_dst : int16_t(-1);
    };

    // Streams in first-seen order.
    std::vector<int64_t> streams;
    auto stream_slot = [&](int64_t stream) -> uint8_t {
        auto it = std::find(streams.begin(), streams.end(), stream);
        if (it != streams.end()) return uint8_t(std::min<ptrdiff_t>(it - streams.begin(), 255));
        streams.push_back(stream);
        return uint8_t(std::min<size_t>(streams.size() - 1, 255));
    };

    // A name's op class, worked out once: the kinds' rule table is too slow to run on every event.
    std::vector<int8_t> class_of_name(f.names.size(), -1);
    auto class_of = [&](uint32_t name) {
        if (class_of_name[name] < 0) class_of_name[name] = int8_t(compute_class_of(f.names[name]));
        return uint8_t(class_of_name[name]);
    };

    RankMetadata meta = kineto_rank_metadata(f, rank, rank_from, groups, window);
    ChunkWriter out(store, rank, f);
    for (uint32_t i = 0; i < spans.size(); ++i) {
        const KinetoSpan& s = spans[i];
        EventRecord e{};
        SpanRecord& r = e.span;
        r.type = uint8_t(EventType::span);
        r.begin_ns = s.begin, r.end_ns = s.end;
        r.name = s.name;
        r.micro_batch = -1, r.layer = -1, r.peer = -1;
        const NameFacts& facts = name_facts[s.name];
        if (s.cat == KinetoCat::step) continue;  // written below, with the window step
        if (!is_device_cat(s.cat)) {
            const HostContext& c = ctx[i];
            r.step = step_of(s.begin);
            r.phase = uint8_t(c.phase == Phase::none && r.step > 0 ? Phase::forward : c.phase);
            r.thread = uint8_t(std::min<uint32_t>(s.thread, 255));
            r.kind = uint8_t(SpanKind::op);
            r.op = class_of(s.name);
            // gloo's span of asynchronous work that outlives the c10d op which issued it: the transfer itself.
            const bool async_gloo = !has_gpu && c.collective >= 0 && c.collective != int32_t(i) && facts.gloo &&
                                    s.end > spans[size_t(c.collective)].end;
            if (!has_gpu && (c.collective == int32_t(i) || async_gloo)) {  // a CPU-only rank's collective
                KinetoSpan n = nest[size_t(c.collective)];
                if (async_gloo) n.bytes = 0, n.collective = facts.op;
                // gloo's own span on its worker thread, outside any c10d op: the transfer's time; its bytes are
                // the launching c10d op's (counted there, not twice).
                if (facts.gloo) n.bytes = 0;
                OpClass op = n.collective != OpClass::none ? n.collective : facts.op;
                r.kind = uint8_t(SpanKind::comm);
                r.op = uint8_t(op);
                r.bytes = n.bytes;
                r.group = group_id(n.group);
                const bool p2p = op == OpClass::send || op == OpClass::recv;
                r.lane = uint8_t(p2p ? Lane::p2p : Lane::comm);
                if (p2p) r.peer = peer_of(n);
            } else {
                // A CPU-only rank's compute is its cpu_ops; annotations (markers), ops inside or around a
                // collective and waits for one are its host side.
                const bool compute =
                    !has_gpu && s.cat == KinetoCat::cpu_op && c.collective < 0 && !c.envelope && !facts.collective_wait;
                r.lane = uint8_t(compute ? Lane::compute : Lane::host);
            }
        } else {
            r.thread = stream_slot(s.stream);
            r.kind = uint8_t(SpanKind::op);
            r.lane = uint8_t(Lane::device);
            r.bytes = s.bytes;
            r.op = class_of(s.name);
            const auto launch = s.correlation >= 0 ? launch_of.find(s.correlation) : launch_of.end();
            const HostContext* c = launch != launch_of.end() ? &ctx[launch->second] : nullptr;
            r.step = c ? step_of(spans[launch->second].begin) : step_of(s.begin);
            r.phase = uint8_t(c ? (c->phase == Phase::none && r.step > 0 ? Phase::forward : c->phase) : Phase::none);
            if (c && c->parent_op >= 0) r.launcher = spans[size_t(c->parent_op)].name;
            // The launch call itself, joined by the correlation id: its lead over the kernel (unknown when a
            // hostile file's times do not subtract).
            if (int64_t lead = 0; c && !__builtin_sub_overflow(s.begin, spans[launch->second].begin, &lead))
                r.launch_lead = lead < int64_t(UINT32_MAX) ? uint32_t(std::max<int64_t>(lead, 0) + 1) : 0;
            if (s.cat == KinetoCat::kernel && facts.nccl_kernel) {
                KinetoSpan n = s;  // the kernel's own args first, then its launching collective's
                if (c && c->collective >= 0) {
                    const KinetoSpan& k = nest[size_t(c->collective)];
                    if (n.collective == OpClass::none) n.collective = k.collective;
                    if (n.bytes == 0) n.bytes = k.bytes;
                    if (n.group < 0) n.group = k.group;
                    if (n.peer_src < 0 && n.peer_dst < 0) n.peer_src = k.peer_src, n.peer_dst = k.peer_dst;
                }
                OpClass op = facts.op;
                if (n.collective != OpClass::none && (op == OpClass::none || op == OpClass::send)) op = n.collective;
                r.lane = uint8_t(Lane::device_comm);
                r.kind = uint8_t(SpanKind::comm);
                r.op = uint8_t(op == OpClass::none ? OpClass::all_reduce : op);
                r.bytes = n.bytes;
                r.group = group_id(n.group);
                if (op == OpClass::send || op == OpClass::recv) r.peer = peer_of(n);
            }
        }
        out.add(e);
    }
    for (const KinetoSpan& s : steps) {
        EventRecord e{};
        SpanRecord& r = e.span;
        r.type = uint8_t(EventType::span);
        r.lane = uint8_t(Lane::host), r.kind = uint8_t(SpanKind::step);
        r.begin_ns = s.begin, r.end_ns = s.end, r.step = s.step + 1;
        r.name = window ? out.extra(window_step) : s.name;
        r.micro_batch = -1, r.layer = -1, r.peer = -1;
        out.add(e);
    }
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
            e.counter.step = step_of(m.t);
            out.add(e);
        }
    }
    meta.stream_ids = streams;
    meta.thread_ids = nlohmann::json::array();  // the timeline labels a host sub-lane by its thread id
    for (const auto& [pid, tid] : f.threads) meta.thread_ids.push_back(tid);
    // The rows HTA counts as GPU time that we do not hold as device spans (KinetoFile::stream_rows), for HTA's
    // figures only, launch being the runtime call of the row's correlation id (unknown when the file has none), or
    // the row's own begin without a correlation.
    for (const KinetoSpan& s : f.stream_rows) {
        HtaStreamRow row{s.begin, s.end, s.stream, f.names[s.name], s.begin, s.correlation >= 0};
        if (s.correlation >= 0) {
            const auto call = launch_of.find(s.correlation);
            row.launch = call == launch_of.end() ? std::nullopt : std::optional<int64_t>(spans[call->second].begin);
        }
        meta.hta_stream_rows.push_back(std::move(row));
    }
    Chunk m;
    m.kind = ChunkKind::metadata;
    m.rank = uint32_t(rank);
    m.text = to_json(meta).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    store.add_chunk(m);
    out.flush();
    Chunk end;  // a file is a whole recording: it ended cleanly
    end.kind = ChunkKind::end;
    end.rank = uint32_t(rank);
    end.text = R"({"clean": true, "dropped_events": 0})";
    store.add_chunk(end);

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
    return warnings;
}

}  // namespace us::prof
