#include "profiler/record/correlation_table.h"

namespace us::prof {

namespace {

// An OpTag in two words, so that a slot is read and written with plain atomics.
void pack(const OpTag& t, uint64_t (&w)[2]) {
    w[0] = uint64_t(t.name) | uint64_t(uint32_t(t.step)) << 32;
    w[1] = uint64_t(uint16_t(t.micro_batch)) | uint64_t(uint16_t(t.layer)) << 16 | uint64_t(t.op) << 32 |
           uint64_t(t.phase) << 40 | uint64_t(t.chunk) << 48;
}

OpTag unpack(const uint64_t (&w)[2]) {
    OpTag t;
    t.name = uint32_t(w[0]);
    t.step = int32_t(uint32_t(w[0] >> 32));
    t.micro_batch = int16_t(uint16_t(w[1]));
    t.layer = int16_t(uint16_t(w[1] >> 16));
    t.op = OpClass(uint8_t(w[1] >> 32));
    t.phase = Phase(uint8_t(w[1] >> 40));
    t.chunk = uint8_t(w[1] >> 48);
    return t;
}

}  // namespace

CorrelationTable::CorrelationTable(uint32_t capacity_pow2)
    : m_mask(capacity_pow2 - 1), m_slots(new Slot[capacity_pow2]) {}  // C++20 atomics start at zero

uint64_t CorrelationTable::open(const OpTag& tag) {
    const uint64_t id = m_next.fetch_add(1, std::memory_order_relaxed);
    Slot& s = m_slots[id & m_mask];
    uint64_t w[2];
    pack(tag, w);
    s.id.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);  // readers see the slot as busy before the words change
    s.words[0].store(w[0], std::memory_order_relaxed);
    s.words[1].store(w[1], std::memory_order_relaxed);
    s.id.store(id, std::memory_order_release);
    return id;
}

std::optional<OpTag> CorrelationTable::find(uint64_t id) const {
    if (id == 0) return std::nullopt;
    const Slot& s = m_slots[id & m_mask];
    if (s.id.load(std::memory_order_acquire) != id) return std::nullopt;
    uint64_t w[2] = {s.words[0].load(std::memory_order_relaxed), s.words[1].load(std::memory_order_relaxed)};
    std::atomic_thread_fence(std::memory_order_acquire);  // the words were read before the id is checked again
    if (s.id.load(std::memory_order_relaxed) != id) return std::nullopt;
    return unpack(w);
}

}  // namespace us::prof
