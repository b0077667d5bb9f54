// The trainer thread's wait for a core (engine/train/core_wait.h), read from the kernel: it only grows, and it grows
// when more threads want the cores than there are. The report's use of it is test_misses.cpp's (a bubble's excess
// explained by it) and the pipeline run's e2e case (every rank's figure).
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "engine/train/core_wait.h"
#include "test_util.h"

TEST_CASE("a thread's wait for a core is read from the kernel and grows while the cores are oversubscribed",
          "[cpu][engine]") {
    const double before = us::thread_runqueue_wait_ms();
    if (before < 0) {
        us::test::skip_test("this kernel gives no /proc/thread-self/schedstat");
        return;
    }
    // two busy threads per core beside this one, which keeps busy too: it must wait for a core now and then
    std::atomic<bool> stop{false};
    std::vector<std::thread> busy;
    for (unsigned i = 0; i < 2 * std::max(1u, std::thread::hardware_concurrency()); ++i)
        busy.emplace_back([&] {
            while (!stop.load(std::memory_order_relaxed)) {
            }
        });
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    while (std::chrono::steady_clock::now() < until) {
    }
    stop = true;
    for (std::thread& t : busy) t.join();
    const double after = us::thread_runqueue_wait_ms();
    CHECK(after > before);
    CHECK(us::thread_runqueue_wait_ms() >= after);
}
