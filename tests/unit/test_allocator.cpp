// The tracked allocator's cache: a freed block is taken again by a request it holds (exactly the same size first,
// else the smallest at most a quarter larger), so a step whose sizes move a little (an expert's rows) reuses warm
// blocks; a request far smaller than every cached block gets its own, and the categories count what was asked.
#include <catch2/catch.hpp>

#include "common/core/allocator.h"

using namespace us;

namespace {

// Host memory that counts the blocks it hands out, to see which requests the cache served.
class CountingMemory final : public RawMemory {
public:
    explicit CountingMemory(int* fresh) : m_fresh(fresh) {}
    void* allocate(size_t bytes) override {
        ++*m_fresh;
        return ::operator new(bytes);
    }
    void release(void* ptr, size_t) override { ::operator delete(ptr); }
    std::string_view device_name() const override { return "counting"; }

private:
    int* m_fresh;
};

constexpr size_t kMiB = size_t(1) << 20;

}  // namespace

TEST_CASE("the allocator reuses a cached block a little larger than the request, the exact size first",
          "[memory][allocator]") {
    int fresh = 0;
    TrackedAllocator alloc(std::make_unique<CountingMemory>(&fresh));
    void* big = nullptr;
    void* exact = nullptr;
    {
        Allocation a = alloc.allocate(5 * kMiB, MemCategory::activations, "expert rows, step 1");
        Allocation b = alloc.allocate(4 * kMiB, MemCategory::activations, "same size next step");
        big = a.data();
        exact = b.data();
    }
    REQUIRE(fresh == 2);
    REQUIRE(alloc.stats().reserved == int64_t(9 * kMiB));

    // 4 MiB: the exact block, though the 5 MiB one would hold it too.
    Allocation same = alloc.allocate(4 * kMiB, MemCategory::activations, "same size");
    CHECK(same.data() == exact);
    // 4.5 MiB: the 5 MiB block (a ninth larger), no fresh pages.
    Allocation moved = alloc.allocate(4 * kMiB + kMiB / 2, MemCategory::activations, "expert rows, step 2");
    CHECK(moved.data() == big);
    CHECK(fresh == 2);
    // The categories count the bytes asked for, not the block's.
    CHECK(alloc.stats().current_of(MemCategory::activations) == int64_t(8 * kMiB + kMiB / 2));
    CHECK(alloc.stats().reserved == int64_t(9 * kMiB));

    // Freed, the block goes back under its own size: a 5 MiB request finds it again.
    moved.reset();
    Allocation again = alloc.allocate(5 * kMiB, MemCategory::temporaries, "whole block");
    CHECK(again.data() == big);
    CHECK(fresh == 2);
}

TEST_CASE("the allocator gives a request far smaller than every cached block a block of its own",
          "[memory][allocator]") {
    int fresh = 0;
    TrackedAllocator alloc(std::make_unique<CountingMemory>(&fresh));
    alloc.allocate(8 * kMiB, MemCategory::grads, "a large buffer").reset();
    REQUIRE(fresh == 1);
    // 6 MiB: the 8 MiB block is a third larger, over the quarter allowed; it stays cached for its own size.
    Allocation small = alloc.allocate(6 * kMiB, MemCategory::activations, "smaller");
    CHECK(fresh == 2);
    CHECK(alloc.stats().reserved == int64_t(14 * kMiB));
    Allocation large = alloc.allocate(8 * kMiB, MemCategory::grads, "the large one again");
    CHECK(fresh == 2);
    alloc.release_cached();
    CHECK(alloc.stats().reserved == int64_t(14 * kMiB));
}
