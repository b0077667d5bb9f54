// One predicted rank's records (spans, memory changes, counters) as the recorder would have written them: names
// interned into the batch's strings, each memory category's running total kept. predicted_trace.cpp fills one per
// pipeline stage.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <unordered_map>

#include "common/core/memory_category.h"
#include "profiler/event.h"

namespace us::plan {

class RankWriter {
public:
    explicit RankWriter(int64_t origin) : m_origin(origin) {}

    int64_t ns(double s) const { return m_origin + int64_t(std::llround(s * 1e9)); }

    void span(prof::Lane lane, prof::SpanKind kind, prof::Phase phase, prof::OpClass op, double b, double e,
              const std::string& name, int step, int micro_batch = -1, int layer = -1, int chunk = 0, int group = 0,
              int peer = -1, uint64_t bytes = 0, uint64_t flops = 0) {
        prof::EventRecord r{};
        prof::SpanRecord& s = r.span;
        s.type = uint8_t(prof::EventType::span);
        s.lane = uint8_t(lane), s.kind = uint8_t(kind), s.phase = uint8_t(phase), s.op = uint8_t(op);
        s.group = uint8_t(std::max(0, group)), s.chunk = uint8_t(chunk), s.thread = 0;
        s.begin_ns = ns(b), s.end_ns = std::max(s.begin_ns, ns(e));
        s.bytes = bytes, s.flops = flops, s.name = id(name), s.step = step;
        s.micro_batch = int16_t(micro_batch), s.layer = int16_t(layer), s.peer = int16_t(peer);
        m_batch.events.push_back(r);
    }

    void memory(MemCategory c, double t, int64_t delta, const std::string& label, prof::Phase phase, int step,
                int micro_batch = -1, int layer = -1) {
        if (delta == 0) return;
        m_category[size_t(c)] += delta;
        m_total += delta;
        prof::EventRecord r{};
        prof::MemoryRecord& m = r.memory;
        m.type = uint8_t(prof::EventType::memory);
        m.category = uint8_t(c), m.phase = uint8_t(phase);
        m.t_ns = ns(t), m.delta_bytes = delta, m.category_bytes = m_category[size_t(c)], m.total_bytes = m_total;
        m.label = id(label), m.step = step, m.micro_batch = int16_t(micro_batch), m.layer = int16_t(layer);
        m_batch.events.push_back(r);
    }

    void counter(const std::string& name, double t, double value, int step) {
        prof::EventRecord r{};
        r.counter.type = uint8_t(prof::EventType::counter);
        r.counter.t_ns = ns(t), r.counter.value = value, r.counter.name = id(name), r.counter.step = step;
        m_batch.events.push_back(r);
    }

    prof::EventBatch take() { return std::move(m_batch); }

private:
    uint32_t id(const std::string& text) {
        auto [it, inserted] = m_ids.try_emplace(text, uint32_t(m_ids.size()));
        if (inserted) m_batch.strings.push_back({it->second, text});
        return it->second;
    }

    int64_t m_origin;
    prof::EventBatch m_batch;
    std::unordered_map<std::string, uint32_t> m_ids;
    std::array<int64_t, kMemCategoryCount> m_category{};
    int64_t m_total = 0;
};

}  // namespace us::plan
