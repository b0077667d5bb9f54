// The ops that launched GPU work, by external correlation id. The launching thread opens an entry per op (no lock,
// no allocation: a fixed ring) and pushes its id to CUPTI; CUPTI ties each launch to the id on top of the thread's
// stack; the translator looks the id up when the launch's kernel arrives, a few hundred milliseconds later. An
// entry is overwritten `capacity` ops later, which a lookup detects (the work is then left unattributed).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

#include "profiler/record/recorder.h"

namespace us::prof {

class CorrelationTable {
public:
    explicit CorrelationTable(uint32_t capacity_pow2 = 1u << 18);  // 6 MiB: over a second of ops at any rate seen

    // Any thread. Returns the op's id (never 0).
    uint64_t open(const OpTag& tag);
    // The tag of an id, unless it was never opened or its entry has been reused since.
    std::optional<OpTag> find(uint64_t id) const;
    uint64_t capacity() const { return m_mask + 1; }

private:
    // A seqlock per slot: `id` is 0 while the slot is being written, then the id whose tag the words hold.
    struct Slot {
        std::atomic<uint64_t> id{0};
        std::atomic<uint64_t> words[2];
    };
    const uint64_t m_mask;
    std::unique_ptr<Slot[]> m_slots;
    std::atomic<uint64_t> m_next{1};
};

}  // namespace us::prof
