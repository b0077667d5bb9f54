#include "common/core/allocator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "common/core/intern.h"

namespace us {

namespace {

class HostMemory final : public RawMemory {
public:
    void* allocate(size_t bytes) override { return std::aligned_alloc(64, bytes); }
    void release(void* ptr, size_t) override { std::free(ptr); }
    std::string_view device_name() const override { return "cpu"; }
};

}  // namespace

std::unique_ptr<RawMemory> make_host_memory() { return std::make_unique<HostMemory>(); }

Allocation& Allocation::operator=(Allocation&& other) noexcept {
    if (this != &other) {
        reset();
        m_ptr = std::exchange(other.m_ptr, nullptr);
        m_bytes = std::exchange(other.m_bytes, 0);
        m_block = std::exchange(other.m_block, 0);
        m_category = other.m_category;
        m_label = other.m_label;
        m_owner = std::exchange(other.m_owner, nullptr);
    }
    return *this;
}

void Allocation::reset() {
    if (m_ptr && m_owner) m_owner->free(*this);
    m_ptr = nullptr;
    m_bytes = 0;
    m_block = 0;
    m_owner = nullptr;
}

void Allocation::recategorize(MemCategory category, std::string_view label) {
    if (m_ptr && m_owner && category != m_category) m_owner->recategorize(*this, category, label);
}

Tensor Allocation::view(DType dtype, int64_t offset_elements, int64_t count) const {
    const size_t end = size_t(offset_elements + count) * dtype_size(dtype);
    US_ASSERT(offset_elements >= 0 && end <= m_bytes, "view of {} bytes past a {}-byte allocation ({})", end, m_bytes,
              m_label ? m_label : "?");
    return Tensor::of(static_cast<char*>(m_ptr) + offset_elements * int64_t(dtype_size(dtype)), dtype, count);
}

TrackedAllocator::TrackedAllocator(std::unique_ptr<RawMemory> raw) : m_raw(std::move(raw)) {}

TrackedAllocator::~TrackedAllocator() { release_cached(); }

// Small blocks round to 512 B, large ones to 64 KiB: a repeating step then finds its blocks again exactly.
size_t TrackedAllocator::round_size(size_t bytes) {
    const size_t granule = bytes < (size_t(1) << 20) ? 512 : (size_t(1) << 16);
    return std::max<size_t>(granule, (bytes + granule - 1) / granule * granule);
}

// The smallest cached block that holds the request and is at most a quarter larger: a repeating step finds its own
// blocks again exactly, and a step whose sizes move a little (the rows an expert gets differ every step) reuses
// warm blocks instead of taking fresh pages from the heap, whose first touch costs a page fault per 4 KiB (the MoE
// run's GELU forward took 16.7 ms a step on fresh pages, 7.7 ms on reused ones; docs/memory.md).
std::pair<void*, size_t> TrackedAllocator::take_block(size_t rounded) {
    if (auto it = m_cached.lower_bound(rounded); it != m_cached.end() && it->first <= rounded + rounded / 4) {
        const auto [size, p] = *it;
        m_cached.erase(it);
        m_cached_bytes -= int64_t(size);
        return {p, size};
    }
    void* p = m_raw->allocate(rounded);
    if (!p && !m_cached.empty()) {  // out of memory: give the cache back and try once more
        for (auto& [size, block] : m_cached) m_raw->release(block, size);
        m_stats.reserved -= m_cached_bytes;
        m_cached.clear();
        m_cached_bytes = 0;
        p = m_raw->allocate(rounded);
    }
    if (p) m_stats.reserved += int64_t(rounded);
    return {p, rounded};
}

Allocation TrackedAllocator::allocate(size_t bytes, MemCategory category, std::string_view label) {
    Allocation a;
    if (bytes == 0) return a;
    const size_t rounded = round_size(bytes);
    const char* interned = intern(label);
    MemoryEvent event{};
    {
        std::lock_guard lock(m_mutex);
        const auto [p, block] = take_block(rounded);
        if (!p) {
            std::string picture;
            for (int i = 0; i < kMemCategoryCount; ++i)
                if (m_stats.current[i])
                    picture += fmt::format("\n  {:<16} {}", kMemCategoryNames[i], format_bytes(m_stats.current[i]));
            fail_user(
                "out of memory on {}: could not allocate {} for {} ({}). In use:{}\n"
                "Try a smaller micro-batch (--batch), activation recomputation (--recompute selective|full), "
                "bf16 (--precision bf16) or a higher ZeRO stage with more ranks.",
                m_raw->device_name(), format_bytes(int64_t(bytes)), mem_category_name(category), label, picture);
        }
        a.m_ptr = p;
        a.m_bytes = bytes;
        a.m_block = block;
        a.m_category = category;
        a.m_label = interned;
        a.m_owner = this;
        auto& cur = m_stats.current[size_t(category)];
        cur += int64_t(bytes);
        m_stats.peak[size_t(category)] = std::max(m_stats.peak[size_t(category)], cur);
        m_stats.total_current += int64_t(bytes);
        m_stats.total_peak = std::max(m_stats.total_peak, m_stats.total_current);
        event = MemoryEvent{p, bytes, category, interned, true, cur, m_stats.total_current};
    }
    if (m_listener) m_listener->on_memory_event(event);
    return a;
}

void TrackedAllocator::free(Allocation& a) {
    MemoryEvent event{};
    {
        std::lock_guard lock(m_mutex);
        auto& cur = m_stats.current[size_t(a.m_category)];
        cur -= int64_t(a.m_bytes);
        m_stats.total_current -= int64_t(a.m_bytes);
        m_cached.emplace(a.m_block, a.m_ptr);
        m_cached_bytes += int64_t(a.m_block);
        event = MemoryEvent{a.m_ptr, a.m_bytes, a.m_category, a.m_label, false, cur, m_stats.total_current};
    }
    if (m_listener) m_listener->on_memory_event(event);
}

void TrackedAllocator::recategorize(Allocation& a, MemCategory category, std::string_view label) {
    const char* interned = intern(label);
    MemoryEvent gone{}, came{};
    {
        std::lock_guard lock(m_mutex);
        auto& old_cur = m_stats.current[size_t(a.m_category)];
        old_cur -= int64_t(a.m_bytes);
        gone = MemoryEvent{
            a.m_ptr, a.m_bytes, a.m_category, a.m_label, false, old_cur, m_stats.total_current - int64_t(a.m_bytes)};
        auto& cur = m_stats.current[size_t(category)];
        cur += int64_t(a.m_bytes);
        m_stats.peak[size_t(category)] = std::max(m_stats.peak[size_t(category)], cur);
        came = MemoryEvent{a.m_ptr, a.m_bytes, category, interned, true, cur, m_stats.total_current};
        a.m_category = category;
        a.m_label = interned;
    }
    if (m_listener) {
        m_listener->on_memory_event(gone);
        m_listener->on_memory_event(came);
    }
}

MemoryStats TrackedAllocator::stats() const {
    std::lock_guard lock(m_mutex);
    return m_stats;
}

void TrackedAllocator::reset_peaks() {
    std::lock_guard lock(m_mutex);
    m_stats.peak = m_stats.current;
    m_stats.total_peak = m_stats.total_current;
}

void TrackedAllocator::set_listener(MemoryListener* listener) {
    std::lock_guard lock(m_mutex);
    m_listener = listener;
}

void TrackedAllocator::release_cached() {
    std::lock_guard lock(m_mutex);
    for (auto& [size, block] : m_cached) m_raw->release(block, size);
    m_stats.reserved -= m_cached_bytes;
    m_cached.clear();
    m_cached_bytes = 0;
}

}  // namespace us
