#include "profiler/trace/trace_store.h"

#include <algorithm>
#include <limits>

#include "common/core/check.h"
#include "profiler/transport/trace_file.h"

namespace us::prof {

// ---- LaneTrack

void LaneTrack::append(const Span& s) {
    m_pending.push_back(s);
    m_last_end = std::max(m_last_end, s.end);
    m_max_duration = std::max(m_max_duration, s.end - s.begin);
}

void LaneTrack::rename(const std::vector<uint32_t>& ids) {
    for (std::vector<Span>* spans : {&m_spans, &m_pending})
        for (Span& s : *spans) {
            s.name = ids[s.name];
            s.launcher = ids[s.launcher];
        }
}

namespace {
// A function object, not a function: std::sort then inlines the comparison (a lane sorts its spans once a load).
struct SpanOrder {
    bool operator()(const Span& a, const Span& b) const {
        return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;  // parents before their children
    }
};
constexpr SpanOrder span_order;
}  // namespace

void LaneTrack::finalize() {
    if (m_pending.empty()) return;
    std::sort(m_pending.begin(), m_pending.end(), span_order);
    const size_t old = m_spans.size();
    // Spans before the first new one keep their places and rows. A live run's new spans land near the end (a parent
    // arrives after its children, a step or a phase back), so the merge and the row assignment below touch the
    // tail, not the whole lane: a frame's cost does not grow with the run's length.
    const size_t from =
        size_t(std::upper_bound(m_spans.begin(), m_spans.end(), m_pending.front(), span_order) - m_spans.begin());
    m_spans.insert(m_spans.end(), m_pending.begin(), m_pending.end());
    m_pending.clear();
    if (from < old)
        std::inplace_merge(m_spans.begin() + std::ptrdiff_t(from), m_spans.begin() + std::ptrdiff_t(old), m_spans.end(),
                           span_order);
    assign_rows(from);
}

void LaneTrack::assign_rows(size_t from) {
    // First-fit rows in (begin, longest first) order: a nested span lands below its parent, a concurrent one beside
    // it. Spans from `from` on are (re)assigned, starting from the rows' state there, which only the spans that can
    // still reach past that point decide: those that begin less than the longest duration before it. With rows by
    // thread, a span only takes a row of its own thread (or a free one), so no row mixes two threads or streams.
    if (m_rows.size() > 255) from = 0;  // a span's row is stored in a byte: rebuild from the start
    for (auto& row : m_rows) row.resize(size_t(std::lower_bound(row.begin(), row.end(), uint32_t(from)) - row.begin()));
    m_row_thread.resize(m_rows.size(), -1);
    for (size_t r = 0; r < m_rows.size(); ++r)
        if (m_rows[r].empty()) m_row_thread[r] = -1;
    std::vector<int64_t> row_end(m_rows.size(), INT64_MIN);
    if (from > 0 && from < m_spans.size()) {
        const int64_t horizon = m_spans[from].begin - m_max_duration;
        for (size_t i = from; i-- > 0 && m_spans[i].begin >= horizon;)
            row_end[m_spans[i].row] = std::max(row_end[m_spans[i].row], m_spans[i].end);
    }
    for (size_t i = from; i < m_spans.size(); ++i) {
        Span& s = m_spans[i];
        auto fits = [&](size_t r) {
            if (row_end[r] > s.begin) return false;
            return !m_by_thread || m_row_thread[r] < 0 || m_row_thread[r] == int16_t(s.thread);
        };
        size_t r = 0;
        while (r < row_end.size() && !fits(r)) ++r;
        if (r == row_end.size()) {
            row_end.push_back(INT64_MIN);
            m_rows.emplace_back();
            m_row_thread.push_back(-1);
        }
        row_end[r] = s.end;
        if (m_by_thread) m_row_thread[r] = int16_t(s.thread);
        s.row = uint8_t(std::min<size_t>(r, 255));
        m_rows[r].push_back(uint32_t(i));
    }
    while (!m_rows.empty() && m_rows.back().empty()) {
        m_rows.pop_back();
        m_row_thread.pop_back();
    }
}

std::pair<size_t, size_t> LaneTrack::visible(int r, int64_t t0, int64_t t1) const {
    const auto& idx = m_rows[size_t(r)];
    // Within a row, begins and ends are both increasing.
    const auto first = std::partition_point(idx.begin(), idx.end(), [&](uint32_t i) { return m_spans[i].end <= t0; });
    const auto last = std::partition_point(first, idx.end(), [&](uint32_t i) { return m_spans[i].begin < t1; });
    return {size_t(first - idx.begin()), size_t(last - idx.begin())};
}

// ---- TraceStore

RankTrace& TraceStore::rank_for(int r) {
    US_CHECK_INPUT(r >= 0 && r < 100000, "trace names rank {}, out of range", r);
    if (size_t(r) >= m_ranks.size()) m_ranks.resize(size_t(r) + 1);
    if (!m_ranks[size_t(r)]) {
        m_ranks[size_t(r)] = std::make_unique<RankTrace>();
        m_ranks[size_t(r)]->rank = r;
        // A GPU's streams run side by side: each gets rows of its own (a sub-lane in the timeline).
        m_ranks[size_t(r)]->lanes[size_t(Lane::device)].set_rows_by_thread(true);
        m_ranks[size_t(r)]->lanes[size_t(Lane::device_comm)].set_rows_by_thread(true);
    }
    return *m_ranks[size_t(r)];
}

uint32_t TraceStore::intern(const std::string& text) {
    auto it = m_name_index.find(text);
    if (it != m_name_index.end()) return it->second;
    const uint32_t id = uint32_t(m_names.size());
    m_names.push_back(text);
    m_name_index.emplace(text, id);
    return id;
}

uint32_t TraceStore::find_name(const std::string& text) const {
    auto it = m_name_index.find(text);
    return it == m_name_index.end() ? std::numeric_limits<uint32_t>::max() : it->second;
}

void TraceStore::add_chunk(const Chunk& c) {
    RankTrace& rt = rank_for(int(c.rank));
    ++rt.chunks;
    ++m_version;
    if (c.kind == ChunkKind::metadata) return add_metadata(rt, c);
    if (c.kind == ChunkKind::end) return add_end(rt, c);
    if (c.kind == ChunkKind::flight_dump) {  // the latest dump replaces an earlier one
        rt.flight_dump = c.text;
        return;
    }
    for (const auto& s : c.strings) rt.names[s.id] = intern(s.text);
    rt.dropped_events = std::max(rt.dropped_events, c.dropped_total);
    for (const EventRecord& e : c.events) {
        switch (EventType(e.type)) {
            case EventType::span:
                add_span(rt, e.span);
                break;
            case EventType::memory:
                add_memory(rt, e.memory);
                break;
            case EventType::counter: {
                const CounterRecord& r = e.counter;
                rt.counters[local_name(rt, r.name)].push_back({r.t_ns - rt.clock_offset_ns, r.value, r.step});
                m_bytes += sizeof(CounterPoint);
                break;
            }
            default:
                break;
        }
    }
}

void TraceStore::add_metadata(RankTrace& rt, const Chunk& c) {
    try {
        rt.set_metadata(nlohmann::json::parse(c.text));
    } catch (const nlohmann::json::exception& e) {
        fail_user("rank {} sent metadata that is not valid JSON: {}", c.rank, e.what());
    }
    if (rt.info.clock) rt.clock_offset_ns = rt.info.clock->offset_ns;
    // An imported PyTorch trace's threads run side by side too: a sub-lane each (its spans are not yet placed).
    if (rt.imported())
        for (LaneTrack& lane : rt.lanes) lane.set_rows_by_thread(true);
}

void TraceStore::add_end(RankTrace& rt, const Chunk& c) {
    rt.ended = true;
    try {
        const auto j = nlohmann::json::parse(c.text);
        rt.clean = j.value("clean", false);
        if (j.contains("reason") && j["reason"].is_string()) rt.end_reason = j["reason"].get<std::string>();
        if (j.value("lost", false)) {  // written by a listener on the rank's behalf
            rt.lost = true;
            rt.lost_reason = j.value("reason", std::string("lost"));
        }
        rt.dropped_events = std::max<uint64_t>(rt.dropped_events, j.value("dropped_events", uint64_t(0)));
    } catch (const nlohmann::json::exception&) {
        fail_user("rank {} sent an end-of-stream note that is not valid JSON", c.rank);
    }
}

uint32_t TraceStore::local_name(RankTrace& rt, uint32_t local) {
    auto it = rt.names.find(local);
    return it == rt.names.end() ? intern("?") : it->second;
}

void TraceStore::add_span(RankTrace& rt, const SpanRecord& r) {
    if (at_cap() && SpanKind(r.kind) == SpanKind::op) {
        ++m_spans_dropped;
        if (m_cap_step == 0) m_cap_step = std::max(1, int(r.step));
        return;
    }
    Span s;
    s.begin = r.begin_ns - rt.clock_offset_ns;
    s.end = r.end_ns - rt.clock_offset_ns;
    s.bytes = r.bytes;
    s.flops = r.flops;
    s.name = local_name(rt, r.name);
    s.launcher = r.launcher == 0 ? 0 : local_name(rt, r.launcher);
    s.launch_lead = r.launch_lead;
    s.step = r.step;
    s.micro_batch = r.micro_batch;
    s.layer = r.layer;
    s.peer = r.peer;
    s.kind = SpanKind(r.kind);
    s.op = OpClass(r.op);
    s.phase = Phase(r.phase);
    s.chunk = r.chunk;
    s.group = r.group;
    s.thread = r.thread;
    rt.lanes[r.lane].append(s);
    ++m_span_count;
    m_bytes += sizeof(Span);
}

void TraceStore::add_memory(RankTrace& rt, const MemoryRecord& r) {
    if (at_cap()) {
        ++m_memory_dropped;
        if (m_cap_step == 0) m_cap_step = std::max(1, int(r.step));
        return;
    }
    m_bytes += sizeof(MemoryPoint);
    MemoryPoint m;
    m.t = r.t_ns - rt.clock_offset_ns;
    m.delta = r.delta_bytes;
    m.category_bytes = r.category_bytes;
    m.total_bytes = r.total_bytes;
    m.label = local_name(rt, r.label);
    m.step = r.step;
    m.micro_batch = r.micro_batch;
    m.layer = r.layer;
    m.category = r.category;
    m.phase = Phase(r.phase);
    rt.memory.push_back(m);
}

void TraceStore::mark_lost(int rank, const std::string& reason) {
    RankTrace& rt = rank_for(rank);
    rt.lost = true;
    rt.lost_reason = reason;
    ++m_version;
}

void TraceStore::finalize() {
    for (auto& r : m_ranks) {
        if (!r) continue;
        for (auto& lane : r->lanes) lane.finalize();
        // Memory events of different threads may interleave out of order across batches.
        if (!std::is_sorted(r->memory.begin(), r->memory.end(), [](auto& a, auto& b) { return a.t < b.t; }))
            std::stable_sort(r->memory.begin(), r->memory.end(), [](auto& a, auto& b) { return a.t < b.t; });
        // So may counters: CUPTI's (device memory) arrive in buffers of their own.
        for (auto& [name, points] : r->counters)
            if (!std::is_sorted(points.begin(), points.end(), [](auto& a, auto& b) { return a.t < b.t; }))
                std::stable_sort(points.begin(), points.end(), [](auto& a, auto& b) { return a.t < b.t; });
    }
}

void TraceStore::merge(TraceStore&& from) {
    from.finalize();
    for (const auto& r : from.m_ranks)
        if (r) US_CHECK_INPUT(!rank(r->rank), "rank {} is in the run twice: give one file per rank", r->rank);
    std::vector<uint32_t> ids(from.m_names.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = intern(from.m_names[i]);
    for (auto& moved : from.m_ranks) {
        if (!moved) continue;
        RankTrace& rt = *moved;
        for (LaneTrack& lane : rt.lanes) lane.rename(ids);
        for (MemoryPoint& m : rt.memory) m.label = ids[m.label];
        std::map<uint32_t, std::vector<CounterPoint>> counters;
        for (auto& [name, points] : rt.counters) counters[ids[name]] = std::move(points);
        rt.counters = std::move(counters);
        for (auto& [local, id] : rt.names) id = ids[id];
        if (size_t(rt.rank) >= m_ranks.size()) m_ranks.resize(size_t(rt.rank) + 1);
        m_ranks[size_t(rt.rank)] = std::move(moved);
    }
    m_span_count += from.m_span_count;
    m_bytes += from.m_bytes;
    m_spans_dropped += from.m_spans_dropped;
    m_memory_dropped += from.m_memory_dropped;
    if (from.m_cap_step > 0) m_cap_step = m_cap_step > 0 ? std::min(m_cap_step, from.m_cap_step) : from.m_cap_step;
    ++m_version;
    from.m_ranks.clear();
    from.m_span_count = from.m_bytes = 0;
    from.m_spans_dropped = from.m_memory_dropped = 0;
    from.m_cap_step = 0;
}

const RankTrace* TraceStore::rank(int r) const {
    return r >= 0 && size_t(r) < m_ranks.size() ? m_ranks[size_t(r)].get() : nullptr;
}

std::vector<int> TraceStore::ranks() const {
    std::vector<int> out;
    for (const auto& r : m_ranks)
        if (r) out.push_back(r->rank);
    return out;
}

int64_t TraceStore::origin() const {
    int64_t t = std::numeric_limits<int64_t>::max();
    for (const auto& r : m_ranks) {
        if (!r) continue;
        for (const auto& lane : r->lanes)
            if (!lane.spans().empty()) t = std::min(t, lane.first_begin());
        if (!r->memory.empty()) t = std::min(t, r->memory.front().t);
    }
    return t == std::numeric_limits<int64_t>::max() ? 0 : t;
}

int64_t TraceStore::end_time() const {
    int64_t t = 0;
    for (const auto& r : m_ranks) {
        if (!r) continue;
        for (const auto& lane : r->lanes) t = std::max(t, lane.last_end());
        if (!r->memory.empty()) t = std::max(t, r->memory.back().t);
    }
    return t;
}

namespace {

const RankTrace* first_with_metadata(const std::vector<std::unique_ptr<RankTrace>>& ranks) {
    for (const auto& r : ranks)
        if (r && r->has_metadata) return r.get();
    return nullptr;
}

}  // namespace

const RankMetadata& TraceStore::run_rank_metadata() const {
    static const RankMetadata empty;
    const RankTrace* r = first_with_metadata(m_ranks);
    return r ? r->info : empty;
}

int TraceStore::world_size() const {
    // An importer writes 0 when its files do not say (and a record may lack it): then the ranks the store holds.
    const RankTrace* r = first_with_metadata(m_ranks);
    return r && r->info.world_size > 0 ? r->info.world_size : int(ranks().size());
}

std::vector<std::string> load_trace(const std::string& path, TraceStore& store) {
    const TraceReadReport report = read_trace(path, [&](Chunk&& c) { store.add_chunk(c); });
    store.finalize();
    return report.warnings;
}

std::optional<std::pair<int, CounterPoint>> TraceStore::latest_counter(const std::string& name) const {
    const uint32_t id = find_name(name);
    if (id == UINT32_MAX) return std::nullopt;
    for (int r : ranks()) {
        const RankTrace* rt = rank(r);
        auto it = rt->counters.find(id);
        if (it != rt->counters.end() && !it->second.empty()) return std::pair{r, it->second.back()};
    }
    return std::nullopt;
}

}  // namespace us::prof
