// The trainer thread's wait for a core (engine/train/core_wait.h), read from the kernel: it only grows, and it grows
// when more threads want the cores than there are; its OpenMP workers are found and only the watched threads' times
// are summed; the analysis's per-step figures are the counters' rises (profiler/analysis/core_wait.h). Its other uses:
// test_misses.cpp (a bubble's excess explained by it), test_blame.cpp (a straggler held by the machine's other load),
// the blame e2e case (an injected noisy neighbour named as such).
#include <omp.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "engine/parallel/injected_load.h"
#include "engine/train/core_wait.h"
#include "prof_test_util.h"
#include "profiler/analysis/core_wait.h"
#include "test_util.h"

namespace {

// True where the kernel gives this thread's run-queue wait; else the test is skipped (said to ctest).
bool schedstat_readable() {
    if (us::thread_runqueue_wait_ms() >= 0) return true;
    us::test::skip_test("this kernel gives no /proc/thread-self/schedstat");
    return false;
}

}  // namespace

TEST_CASE("a thread's wait for a core is read from the kernel and grows while the cores are oversubscribed",
          "[cpu][engine]") {
    if (!schedstat_readable()) return;
    const double before = us::thread_runqueue_wait_ms();
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

TEST_CASE("the OpenMP workers are found, and the watched threads' times are summed, the others left out",
          "[cpu][engine]") {
    if (!schedstat_readable()) return;
    const int threads = omp_get_max_threads();
    omp_set_num_threads(3);
    const std::vector<int> workers = us::openmp_worker_tids();
    CHECK(workers.size() == 2);  // the team of three less this thread
    CHECK(std::find(workers.begin(), workers.end(), int(::gettid())) == workers.end());
    omp_set_num_threads(1);
    CHECK(us::openmp_worker_tids().empty());
    omp_set_num_threads(threads);

    // A worker pinned to one CPU beside a busy thread: both wait about half the time; only the watched one counts.
    // It keeps busy until this thread has read the tally twice, however late the machine lets it.
    std::atomic<int> worker_tid{0};
    std::atomic<bool> read_twice{false};
    double worker_waited = 0;
    std::thread worker([&] {
        worker_tid = int(::gettid());
        const double start = us::thread_runqueue_wait_ms();
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(sched_getcpu(), &one);
        pthread_setaffinity_np(pthread_self(), sizeof one, &one);
        std::atomic<bool> stop{false};
        std::thread busy([&] {
            while (!stop.load(std::memory_order_relaxed)) {
            }
        });
        pthread_setaffinity_np(busy.native_handle(), sizeof one, &one);
        while (!read_twice.load(std::memory_order_relaxed)) {
        }
        stop = true;
        busy.join();
        worker_waited = us::thread_runqueue_wait_ms() - start;
    });
    while (worker_tid == 0) std::this_thread::yield();
    us::WorkerThreadsTimes tally({worker_tid.load()});
    CHECK(tally.totals().waiting_ms == 0);  // the first call
    // seen 50 ms in, then 200 ms later: between the two the worker waited about 100 ms and ran about 100 ms
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const us::ThreadTimes first_seen = tally.totals();
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const us::ThreadTimes seen_again = tally.totals();
    const double between_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    read_twice = true;
    worker.join();
    const double window = seen_again.waiting_ms - first_seen.waiting_ms;
    const double ran = seen_again.on_cpu_ms - first_seen.on_cpu_ms;
    CHECK(window > 0.2 * between_ms);
    CHECK(window <= worker_waited + 5);  // the busy thread's wait left out: with it, about twice the worker's
    CHECK(ran > 0.2 * between_ms);
    CHECK(window + ran <= between_ms + 5);  // one thread: never more than the time between the reads
    // A thread that ended adds nothing more, and the sums do not drop.
    CHECK(tally.totals().waiting_ms == seen_again.waiting_ms);
    CHECK(tally.totals().on_cpu_ms == seen_again.on_cpu_ms);
    CHECK(us::WorkerThreadsTimes().empty());
}

TEST_CASE("each step's wait for a core is the counter's rise since the step before, and a gap leaves it unknown",
          "[cpu][analysis]") {
    us::test::SyntheticRank r(0);
    const std::string counter(us::prof::kRunQueueWaitCounter);
    const std::string workers(us::prof::kWorkerRunQueueWaitCounter);
    // steps 1-3 and 5 (4 has no counter: a step the trace lost), the counter recorded at each one's end in ms
    for (int step : {1, 2, 3, 4, 5}) r.step(10 * (step - 1), 10 * step - 1, step);
    r.counter(9, counter, 100, 1);
    r.counter(19, counter, 103, 2);
    r.counter(29, counter, 110.5, 3);
    r.counter(49, counter, 111, 5);
    r.counter(9, workers, 0, 1);
    r.counter(19, workers, 40, 2);
    r.counter(29, workers, 41, 3);
    const std::string cpu(us::prof::kThreadCpuCounter);
    r.counter(9, cpu, 5, 1);
    r.counter(19, cpu, 12, 2);
    us::prof::TraceStore store;
    us::test::load(store, r, us::test::metadata(0, 1, 0, 0, 1));
    const auto steps = us::prof::analyze_steps(store, 0);
    REQUIRE(steps.size() == 5);
    CHECK(steps[0].core_wait_s == -1);  // no point before step 1
    CHECK(steps[1].core_wait_s == Approx(0.003));
    CHECK(steps[2].core_wait_s == Approx(0.0075));
    CHECK(steps[3].core_wait_s == -1);  // step 4 recorded none
    CHECK(steps[4].core_wait_s == -1);  // nor, then, does step 5 have a point before it
    CHECK(us::prof::runqueue_wait_s({steps[1], steps[2]}) == Approx(0.0105));
    CHECK(us::prof::runqueue_wait_s({steps[1], steps[3]}) == -1);  // one unknown step: unknown
    CHECK(us::prof::sum_steps({steps[1], steps[2]}).core_wait_s == Approx(0.0105));
    CHECK(steps[0].worker_core_wait_s == -1);
    CHECK(steps[1].worker_core_wait_s == Approx(0.040));
    CHECK(steps[1].core_cpu_s == Approx(0.007));
    CHECK(steps[2].core_cpu_s == -1);    // not recorded at step 3's end
    CHECK(steps[1].worker_cpu_s == -1);  // never recorded
    CHECK(steps[2].worker_core_wait_s == Approx(0.001));
    CHECK(steps[3].worker_core_wait_s == -1);
    CHECK(us::prof::sum_steps({steps[1], steps[2]}).worker_core_wait_s == Approx(0.041));
    CHECK(us::prof::sum_over_steps_s(std::vector<us::prof::StepBreakdown>{steps[1], steps[2]},
                                     &us::prof::StepBreakdown::worker_core_wait_s) == Approx(0.041));
}

TEST_CASE("an injected noisy neighbour takes this thread's CPU: it waits for a core, and the busy threads stop",
          "[cpu][engine]") {
    if (!schedstat_readable()) return;
    // run on a thread of its own: the pin stays with it, not with the test runner's thread
    double waited = 0, busy_for = 0;
    std::thread([&] {
        const double start = us::thread_runqueue_wait_ms();
        const auto t0 = std::chrono::steady_clock::now();
        {
            us::InjectedLoad load(3.0);  // two busy threads on this thread's CPU: it gets about a third of it
            const auto until = t0 + std::chrono::milliseconds(300);
            while (std::chrono::steady_clock::now() < until) {
            }
        }
        busy_for = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        waited = us::thread_runqueue_wait_ms() - start;
    }).join();
    // about two thirds of the 300 ms on the CPU went to the busy threads; at least a third is beyond any scheduler
    CHECK(waited > 0.33 * busy_for);
    CHECK_THROWS_AS(us::InjectedLoad(1.0), us::UserError);
}
