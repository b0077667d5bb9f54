// The tracked allocator: every byte the engine uses comes from here with a category and a label. It keeps current
// and peak bytes per category, reports every alloc/free to a listener (the profiler), and caches freed blocks by
// size so that the steady state of training does no heap calls, as PyTorch's caching allocator does.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "common/core/format.h"

#include "common/core/memory_category.h"
#include "common/core/tensor.h"

namespace us {

// Where bytes really come from: the host heap, or device memory for the CUDA backend.
class RawMemory {
public:
    virtual ~RawMemory() = default;
    virtual void* allocate(size_t bytes) = 0;  // nullptr when the device is out of memory
    virtual void release(void* ptr, size_t bytes) = 0;
    virtual std::string_view device_name() const = 0;
};

std::unique_ptr<RawMemory> make_host_memory();

struct MemoryEvent {
    const void* ptr;
    size_t bytes;
    MemCategory category;
    const char* label;  // interned
    bool is_alloc;
    int64_t category_bytes_after;  // current bytes of the category once this event is applied
    int64_t total_bytes_after;
};

class MemoryListener {
public:
    virtual ~MemoryListener() = default;
    virtual void on_memory_event(const MemoryEvent& event) = 0;
};

struct MemoryStats {
    std::array<int64_t, kMemCategoryCount> current{};
    std::array<int64_t, kMemCategoryCount> peak{};
    int64_t total_current = 0;
    int64_t total_peak = 0;  // peak of the sum, not the sum of peaks
    int64_t reserved = 0;    // bytes held from the device, cached blocks included

    int64_t current_of(MemCategory c) const { return current[size_t(c)]; }
    int64_t peak_of(MemCategory c) const { return peak[size_t(c)]; }
};

class TrackedAllocator;

// One live allocation; frees itself when it goes out of scope. Move-only.
class Allocation {
public:
    Allocation() = default;
    Allocation(Allocation&& other) noexcept { *this = std::move(other); }
    Allocation& operator=(Allocation&& other) noexcept;
    Allocation(const Allocation&) = delete;
    Allocation& operator=(const Allocation&) = delete;
    ~Allocation() { reset(); }

    void reset();  // frees now
    // Moves the bytes to another category without touching them (a free and an alloc event for the listener):
    // a pipeline receive buffer is a communication buffer until the forward takes it as its input activation.
    void recategorize(MemCategory category, std::string_view label);
    void* data() const { return m_ptr; }
    size_t bytes() const { return m_bytes; }
    MemCategory category() const { return m_category; }
    explicit operator bool() const { return m_ptr != nullptr; }

    // A typed view of `count` elements starting `offset_elements` into this allocation.
    Tensor view(DType dtype, int64_t offset_elements, int64_t count) const;
    Tensor all(DType dtype) const { return view(dtype, 0, int64_t(m_bytes / dtype_size(dtype))); }

private:
    friend class TrackedAllocator;
    void* m_ptr = nullptr;
    size_t m_bytes = 0;
    size_t m_block = 0;  // the block's size, which may exceed the rounded request (TrackedAllocator::take_block)
    MemCategory m_category = MemCategory::workspace;
    const char* m_label = nullptr;
    TrackedAllocator* m_owner = nullptr;
};

class TrackedAllocator {
public:
    explicit TrackedAllocator(std::unique_ptr<RawMemory> raw);
    ~TrackedAllocator();
    TrackedAllocator(const TrackedAllocator&) = delete;
    TrackedAllocator& operator=(const TrackedAllocator&) = delete;

    // Throws UserError (with the per-category picture and what to try) when the device is out of memory.
    Allocation allocate(size_t bytes, MemCategory category, std::string_view label);

    MemoryStats stats() const;
    void reset_peaks();
    void set_listener(MemoryListener* listener);
    void release_cached();  // gives cached free blocks back to the device
    std::string_view device_name() const { return m_raw->device_name(); }

private:
    friend class Allocation;
    void free(Allocation& allocation);
    void recategorize(Allocation& allocation, MemCategory category, std::string_view label);
    std::pair<void*, size_t> take_block(size_t rounded);  // the block and its size
    static size_t round_size(size_t bytes);

    std::unique_ptr<RawMemory> m_raw;
    mutable std::mutex m_mutex;
    MemoryStats m_stats;
    std::multimap<size_t, void*> m_cached;  // free blocks by size
    int64_t m_cached_bytes = 0;
    MemoryListener* m_listener = nullptr;
};

}  // namespace us
