#include "profiler/record/recorder.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace us::prof {

namespace detail {

std::atomic<bool> g_enabled{false};
std::atomic<const OpHooks*> g_op_hooks{nullptr};

namespace {

// Every ring ever created, so the collector can find them; rings of finished threads stay (they are small) so
// that their last events are still drained.
struct RingRegistry {
    std::mutex mutex;
    std::vector<std::unique_ptr<EventRing>> rings;
};
RingRegistry& registry() {
    static RingRegistry r;
    return r;
}

struct ThreadState {
    EventRing* ring = nullptr;
    uint8_t slot = 0;
    RecordContext context;
};
thread_local ThreadState t_state;

}  // namespace

EventRing& thread_ring() {
    if (!t_state.ring) [[unlikely]] {
        RingRegistry& r = registry();
        std::lock_guard lock(r.mutex);
        r.rings.push_back(std::make_unique<EventRing>());
        t_state.ring = r.rings.back().get();
        t_state.slot = uint8_t(std::min<size_t>(r.rings.size() - 1, 255));
    }
    return *t_state.ring;
}

uint8_t thread_slot() { return t_state.slot; }
RecordContext& thread_context() { return t_state.context; }

}  // namespace detail

namespace {

struct StringTable {
    std::mutex mutex;
    std::unordered_map<std::string, uint32_t> ids;
    std::vector<std::string> texts;  // by id
};
StringTable& strings() {
    static StringTable t;
    return t;
}

// Records from collectors with their own clock (CUPTI), already in nanoseconds, waiting for the next drain.
struct ExternalQueue {
    std::mutex mutex;
    std::vector<EventRecord> events;
    std::atomic<uint64_t> dropped{0};  // records that did not fit, and what collectors reported lost
};
ExternalQueue& external_queue() {
    static ExternalQueue q;
    return q;
}

class Collector {
public:
    Collector(std::vector<std::unique_ptr<EventSink>> sinks, const std::string& metadata, int flush_ms)
        : m_sinks(std::move(sinks)), m_metadata(metadata), m_flush_ms(flush_ms) {
        for (auto& s : m_sinks) s->write_metadata(m_metadata);
        m_thread = std::thread([this] { loop(); });
    }

    void stop(bool clean, const std::string& reason) {
        {
            std::lock_guard lock(m_mutex);
            m_stopping = true;
        }
        m_wake.notify_all();
        m_thread.join();
        drain();
        const uint64_t dropped = dropped_events();
        for (auto& s : m_sinks) s->finish(clean, dropped, reason);
    }

    void update_metadata(const std::string& json) {
        std::lock_guard lock(m_sink_mutex);
        m_metadata = json;
        for (auto& s : m_sinks) s->write_metadata(json);
    }

    void write_flight_dump(const std::string& pickle) {
        drain();  // the events up to the dump travel ahead of it
        std::lock_guard lock(m_sink_mutex);
        for (auto& s : m_sinks) s->write_flight_dump(pickle);
    }

private:
    void loop() {
        std::unique_lock lock(m_mutex);
        while (!m_stopping) {
            m_wake.wait_for(lock, std::chrono::milliseconds(m_flush_ms));
            if (m_stopping) break;
            lock.unlock();
            drain();
            lock.lock();
        }
    }

    void drain() {
        std::lock_guard sink_lock(m_sink_mutex);
        EventBatch batch;
        // Events first, the string table after: a name is interned before any event that uses it is written, so
        // every name an event read here refers to is in the table read below.
        {
            ExternalQueue& q = external_queue();
            std::lock_guard lock(q.mutex);
            m_external.swap(q.events);  // both keep their capacity: no allocation once warm
        }
        {
            auto& r = detail::registry();
            std::lock_guard lock(r.mutex);
            for (auto& ring : r.rings)
                ring->drain([&](const EventRecord& e) {
                    if (e.type >= uint8_t(EventType::span) && e.type <= uint8_t(EventType::counter))
                        batch.events.push_back(e);
                });
        }
        {
            auto& t = strings();
            std::lock_guard lock(t.mutex);
            for (uint32_t id = m_strings_sent; id < t.texts.size(); ++id) batch.strings.push_back({id, t.texts[id]});
            m_strings_sent = uint32_t(t.texts.size());
        }
        // The calibration point comes after the reads, so every event read lies before it (docs in clock.h).
        m_clock.add_point();
        for (EventRecord& e : batch.events) {
            switch (EventType(e.type)) {
                case EventType::span:
                    e.span.begin_ns = m_clock.to_ns(e.span.begin_ns);
                    e.span.end_ns = m_clock.to_ns(e.span.end_ns);
                    break;
                case EventType::memory:
                    e.memory.t_ns = m_clock.to_ns(e.memory.t_ns);
                    break;
                case EventType::counter:
                    e.counter.t_ns = m_clock.to_ns(e.counter.t_ns);
                    break;
                default:
                    break;
            }
        }
        batch.events.insert(batch.events.end(), m_external.begin(), m_external.end());  // in ns already
        m_external.clear();
        batch.dropped_total = dropped_events();
        if (batch.events.empty() && batch.strings.empty()) return;
        for (auto& s : m_sinks) s->write_batch(batch);
    }

    std::vector<std::unique_ptr<EventSink>> m_sinks;
    std::string m_metadata;
    int m_flush_ms;
    TickConverter m_clock;
    std::vector<EventRecord> m_external;
    uint32_t m_strings_sent = 0;
    std::mutex m_mutex, m_sink_mutex;
    std::condition_variable m_wake;
    bool m_stopping = false;
    std::thread m_thread;
};

std::mutex g_collector_mutex;
std::unique_ptr<Collector> g_collector;

}  // namespace

uint32_t string_id(std::string_view text) {
    auto& t = strings();
    std::lock_guard lock(t.mutex);
    auto it = t.ids.find(std::string(text));
    if (it != t.ids.end()) return it->second;
    const uint32_t id = uint32_t(t.texts.size());
    t.texts.emplace_back(text);
    t.ids.emplace(std::string(text), id);
    return id;
}

void start_recording(std::vector<std::unique_ptr<EventSink>> sinks, const std::string& metadata_json,
                     const RecorderOptions& options) {
    std::lock_guard lock(g_collector_mutex);
    if (g_collector) return;
    {
        ExternalQueue& q = external_queue();  // leftovers of an earlier recording belong to no sink
        std::lock_guard queue_lock(q.mutex);
        q.events.clear();
    }
    g_collector = std::make_unique<Collector>(std::move(sinks), metadata_json, options.flush_ms);
    detail::g_enabled.store(true, std::memory_order_release);
}

void stop_recording(bool clean, const std::string& reason) {
    std::lock_guard lock(g_collector_mutex);
    if (!g_collector) return;
    detail::g_enabled.store(false, std::memory_order_release);
    g_collector->stop(clean, reason);
    g_collector.reset();
}

void update_metadata(const std::string& metadata_json) {
    std::lock_guard lock(g_collector_mutex);
    if (g_collector) g_collector->update_metadata(metadata_json);
}

void record_flight_dump(const std::string& pickle) {
    std::lock_guard lock(g_collector_mutex);
    if (g_collector) g_collector->write_flight_dump(pickle);
}

void install_op_hooks(const OpHooks* hooks) { detail::g_op_hooks.store(hooks, std::memory_order_release); }

void record_external_events(const EventRecord* events, size_t count) {
    if (!enabled() || count == 0) return;
    ExternalQueue& q = external_queue();
    std::lock_guard lock(q.mutex);
    const size_t fit = std::min(count, kMaxExternalEvents - std::min(kMaxExternalEvents, q.events.size()));
    q.events.insert(q.events.end(), events, events + fit);
    if (fit < count) q.dropped.fetch_add(count - fit, std::memory_order_relaxed);
}

void add_dropped_events(uint64_t count) { external_queue().dropped.fetch_add(count, std::memory_order_relaxed); }

uint64_t dropped_events() {
    uint64_t n = external_queue().dropped.load(std::memory_order_relaxed);
    auto& r = detail::registry();
    std::lock_guard lock(r.mutex);
    for (auto& ring : r.rings) n += ring->dropped();
    return n;
}

void record_memory(int64_t delta_bytes, uint8_t category, int64_t category_bytes, int64_t total_bytes, uint32_t label) {
    EventRing& ring = detail::thread_ring();
    EventRecord* r = ring.begin_write();
    if (!r) return;
    const RecordContext& c = detail::thread_context();
    MemoryRecord& m = r->memory;
    m = MemoryRecord{};
    m.t_ns = read_ticks();
    m.delta_bytes = delta_bytes;
    m.category_bytes = category_bytes;
    m.total_bytes = total_bytes;
    m.label = label;
    m.step = c.step;
    m.micro_batch = c.micro_batch;
    m.layer = c.layer;
    m.type = uint8_t(EventType::memory);
    m.category = category;
    m.phase = uint8_t(c.phase);
    ring.end_write();
}

void record_counter(uint32_t name, double value) {
    EventRing& ring = detail::thread_ring();
    EventRecord* r = ring.begin_write();
    if (!r) return;
    CounterRecord& c = r->counter;
    c = CounterRecord{};
    c.t_ns = read_ticks();
    c.value = value;
    c.name = name;
    c.step = detail::thread_context().step;
    c.type = uint8_t(EventType::counter);
    ring.end_write();
}

}  // namespace us::prof
