#include "profiler/record/device_activity.h"

#include "profiler/record/recorder.h"

namespace us::prof {

DeviceActivityTranslator::DeviceActivityTranslator(const CorrelationTable& ops, const GpuClockMap& clock,
                                                   uint32_t correlation_capacity_pow2)
    : m_ops(ops), m_clock(clock), m_calls(correlation_capacity_pow2), m_calls_mask(correlation_capacity_pow2 - 1) {
    static constexpr const char* kMemcpyNames[] = {"memcpy",      "memcpy HtoD", "memcpy DtoH",
                                                   "memcpy DtoD", "memcpy HtoH", "memcpy PtoP"};
    for (int i = 0; i < 6; ++i) m_memcpy_names[i] = string_id(kMemcpyNames[i]);
    m_memset_name = string_id("memset");
    m_sync_names[int(SyncKind::event)] = string_id("cudaEventSynchronize");
    m_sync_names[int(SyncKind::stream)] = string_id("cudaStreamSynchronize");
    m_sync_names[int(SyncKind::context)] = string_id("cudaDeviceSynchronize");
    m_reserved_name = string_id(kDeviceReservedCounter);
    m_overhead_name = string_id(kCuptiOverheadCounter);
    m_dropped_name = string_id(kCuptiDroppedCounter);
}

bool DeviceActivityTranslator::timed(uint64_t start, uint64_t end) {
    if ((start == 0 && end == 0) || end < start) {
        ++m_stats.untimed;
        return false;
    }
    return true;
}

uint8_t DeviceActivityTranslator::stream_slot(uint32_t context, uint32_t stream) {
    for (size_t i = 0; i < m_streams.size(); ++i)
        if (m_streams[i].first == context && m_streams[i].second == stream) return uint8_t(i);
    if (m_streams.size() == 255) return 255;  // every further stream shares the last row
    m_streams.emplace_back(context, stream);
    return uint8_t(m_streams.size() - 1);
}

void DeviceActivityTranslator::add_span(Lane lane, SpanKind kind, OpClass op, uint32_t name, uint64_t start,
                                        uint64_t end, uint64_t bytes, uint8_t thread, uint32_t correlation,
                                        uint32_t runtime_correlation, bool device_work, bool nccl) {
    Pending p{};
    SpanRecord& s = p.record.span;
    s.type = uint8_t(EventType::span);
    s.lane = uint8_t(lane);
    s.kind = uint8_t(kind);
    s.phase = uint8_t(Phase::none);
    s.op = uint8_t(op);
    s.thread = thread;
    s.begin_ns = m_clock.to_host(start);
    s.end_ns = std::max(s.begin_ns, m_clock.to_host(end));
    s.bytes = bytes;
    s.name = name;
    s.micro_batch = -1;
    s.layer = -1;
    s.peer = -1;
    p.correlation[0] = correlation;
    p.correlation[1] = runtime_correlation;
    p.device_work = device_work;
    p.nccl = nccl;
    m_pending.push_back(p);
}

void DeviceActivityTranslator::add_counter(uint32_t name, double value, uint64_t at, uint32_t correlation) {
    Pending p{};
    CounterRecord& c = p.record.counter;
    c.type = uint8_t(EventType::counter);
    c.t_ns = m_clock.to_host(at);
    c.value = value;
    c.name = name;
    p.correlation[0] = correlation;
    m_pending.push_back(p);
}

void DeviceActivityTranslator::add(const KernelActivity& k) {
    ++m_stats.kernels;
    if (!timed(k.start, k.end)) return;
    auto it = m_kernels.find(k.name);
    if (it == m_kernels.end()) {
        const std::string readable = readable_kernel_name(k.name);
        it = m_kernels.emplace(std::string(k.name), KernelInfo{string_id(readable), classify_kernel(readable)}).first;
    }
    const KernelInfo& info = it->second;
    if (info.kind.nccl) ++m_stats.nccl_kernels;
    add_span(info.kind.nccl ? Lane::device_comm : Lane::device, info.kind.nccl ? SpanKind::comm : SpanKind::op,
             info.kind.op, info.name, k.start, k.end, 0, stream_slot(k.context, k.stream), k.correlation, 0, true,
             info.kind.nccl);
}

void DeviceActivityTranslator::add(const MemcpyActivity& m) {
    ++m_stats.memcpys;
    if (!timed(m.start, m.end)) return;
    add_span(Lane::device, SpanKind::op, OpClass::none, m_memcpy_names[int(m.direction)], m.start, m.end, m.bytes,
             stream_slot(m.context, m.stream), m.correlation, m.runtime_correlation, true, false);
}

void DeviceActivityTranslator::add(const MemsetActivity& m) {
    ++m_stats.memsets;
    if (!timed(m.start, m.end)) return;
    add_span(Lane::device, SpanKind::op, OpClass::none, m_memset_name, m.start, m.end, m.bytes,
             stream_slot(m.context, m.stream), m.correlation, 0, true, false);
}

void DeviceActivityTranslator::add(const ExternalCorrelation& c) {
    if (c.external_id == 0) return;
    m_calls[c.correlation & m_calls_mask] = {c.correlation, c.external_id};
}

void DeviceActivityTranslator::add(const MemoryActivity& m) {
    if (!m.device) return;
    if (m.allocation) {
        ++m_stats.allocations;
        m_live[m.address] = m.bytes;
        m_reserved += int64_t(m.bytes);
    } else {
        ++m_stats.releases;
        auto it = m_live.find(m.address);
        if (it == m_live.end()) {
            ++m_stats.unknown_releases;
            return;
        }
        m_reserved -= int64_t(it->second);
        m_live.erase(it);
    }
    add_counter(m_reserved_name, double(m_reserved), m.time, m.correlation);
}

void DeviceActivityTranslator::add(const OverheadActivity& o) {
    if (!timed(o.start, o.end)) return;
    m_overhead_ms += double(o.end - o.start) / 1e6;
    m_stats.overhead_ms = m_overhead_ms;
    add_counter(m_overhead_name, m_overhead_ms, o.end, 0);
}

void DeviceActivityTranslator::add(const SyncActivity& s) {
    ++m_stats.syncs;
    if (!timed(s.start, s.end)) return;
    add_span(Lane::host, SpanKind::wait, OpClass::none, m_sync_names[int(s.kind)], s.start, s.end, 0, 0, s.correlation,
             0, false, false);
}

void DeviceActivityTranslator::add_dropped(uint64_t count, uint64_t at) {
    if (count == 0) return;
    m_dropped += count;
    m_stats.dropped = m_dropped;
    add_counter(m_dropped_name, double(m_dropped), at, 0);
}

uint64_t DeviceActivityTranslator::external_id_of(uint32_t correlation) const {
    if (correlation == 0) return 0;
    const CallToOp& c = m_calls[correlation & m_calls_mask];
    return c.correlation == correlation ? c.external_id : 0;
}

bool DeviceActivityTranslator::attribute(Pending& p) const {
    uint64_t id = external_id_of(p.correlation[0]);
    if (!id) id = external_id_of(p.correlation[1]);
    if (!id) return false;
    const std::optional<OpTag> tag = m_ops.find(id);
    if (!tag) return false;
    if (p.record.type == uint8_t(EventType::counter)) {
        p.record.counter.step = tag->step;
        return true;
    }
    SpanRecord& s = p.record.span;
    s.step = tag->step;
    s.micro_batch = tag->micro_batch;
    s.layer = tag->layer;
    s.phase = uint8_t(tag->phase);
    s.chunk = tag->chunk;
    const OpClass own = OpClass(s.op);
    if (p.nccl) {
        // The kernel names its collective; the launching op only settles what the name cannot tell.
        if (own == OpClass::none && is_comm_op(tag->op)) s.op = uint8_t(tag->op);
        if (own == OpClass::send && tag->op == OpClass::recv) s.op = uint8_t(OpClass::recv);
    } else if (own == OpClass::none) {
        s.op = uint8_t(tag->op);
    }
    return true;
}

void DeviceActivityTranslator::emit(std::vector<EventRecord>& out, bool final) {
    m_waiting.clear();
    for (Pending& p : m_pending) {
        const bool known = attribute(p);
        const bool has_call = p.correlation[0] != 0 || p.correlation[1] != 0;
        if (!known && has_call && p.rounds == 0 && !final) {
            ++p.rounds;
            m_waiting.push_back(p);
            continue;
        }
        if (p.device_work) ++(known ? m_stats.attributed : m_stats.unattributed);
        out.push_back(p.record);
    }
    m_pending.swap(m_waiting);
}

}  // namespace us::prof
