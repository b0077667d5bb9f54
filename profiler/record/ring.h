// A single-producer single-consumer ring of event records: the recording thread writes, the collector thread
// reads. No lock on either side; when the collector falls behind, new events are dropped and counted rather than
// ever making the training thread wait.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "profiler/event.h"

namespace us::prof {

class EventRing {
public:
    explicit EventRing(uint32_t capacity_pow2 = 1u << 15)
        : m_mask(capacity_pow2 - 1), m_slots(new EventRecord[capacity_pow2]) {}

    // Producer side. Returns a slot to fill, or nullptr when full (the event is counted as dropped).
    EventRecord* begin_write() {
        const uint64_t head = m_head.load(std::memory_order_relaxed);
        if (head - m_tail_cache > m_mask) {
            m_tail_cache = m_tail.load(std::memory_order_acquire);
            if (head - m_tail_cache > m_mask) {
                m_dropped.fetch_add(1, std::memory_order_relaxed);
                return nullptr;
            }
        }
        return &m_slots[head & m_mask];
    }
    void end_write() { m_head.store(m_head.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

    // Consumer side: calls fn(const EventRecord&) for every record written so far, then frees their slots.
    template <typename Fn>
    uint64_t drain(Fn&& fn) {
        const uint64_t head = m_head.load(std::memory_order_acquire);
        const uint64_t tail = m_tail.load(std::memory_order_relaxed);
        for (uint64_t i = tail; i < head; ++i) fn(m_slots[i & m_mask]);
        m_tail.store(head, std::memory_order_release);
        return head - tail;
    }

    uint64_t dropped() const { return m_dropped.load(std::memory_order_relaxed); }

private:
    const uint64_t m_mask;
    std::unique_ptr<EventRecord[]> m_slots;
    alignas(64) std::atomic<uint64_t> m_head{0};
    uint64_t m_tail_cache = 0;  // producer's view of the tail
    alignas(64) std::atomic<uint64_t> m_tail{0};
    std::atomic<uint64_t> m_dropped{0};
};

}  // namespace us::prof
