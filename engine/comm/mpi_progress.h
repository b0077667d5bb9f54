// The progress engine of the MPI communicator: every non-blocking MPI operation is an MpiOp, started in
// submission order (so every rank starts its collectives alike) and completed either by a progress thread (the
// default: collectives advance while the compute thread works) or by polling from the compute thread (--comm-progress
// poll). It records each operation's span when it completes and aborts the job when one outlives the watchdog
// (ULTRASCOPE_COMM_TIMEOUT_S): a peer that died must never leave this rank hanging. Internal to engine/comm.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/comm/mpi_comm.h"
#include "profiler/record/zones.h"

// A failed MPI call is a broken job: name the call and abort every rank instead of leaving them hanging.
#define US_MPI_CHECK(call)                                                                                            \
    do {                                                                                                              \
        const int us_mpi_rc = (call);                                                                                 \
        if (us_mpi_rc != MPI_SUCCESS) {                                                                               \
            char us_mpi_msg[MPI_MAX_ERROR_STRING];                                                                    \
            int us_mpi_len = 0;                                                                                       \
            MPI_Error_string(us_mpi_rc, us_mpi_msg, &us_mpi_len);                                                     \
            ::us::MpiRuntime::abort(3, fmt::format("{} failed at {}:{}: {}", #call, __FILE__, __LINE__, us_mpi_msg)); \
        }                                                                                                             \
    } while (0)

namespace us {

struct MpiOp final : CommRequest {
    std::function<int(MPI_Request*)> start;
    MPI_Request request = MPI_REQUEST_NULL;
    std::atomic<bool> done{false};
    std::shared_ptr<void> keep;  // buffers the op owns (scalar collectives)
    // for the span and the watchdog
    prof::Lane lane = prof::Lane::comm;
    prof::OpClass op = prof::OpClass::none;
    uint8_t group = 0;
    uint64_t bytes = 0;
    int16_t peer = -1;
    const char* what = "";
    prof::RecordContext context;
    std::shared_ptr<std::atomic<int>> group_pending;  // the communicator's count of ops in flight
    int64_t submit_ticks = 0;
    std::chrono::steady_clock::time_point submitted;
    bool test() override;
    void wait() override;
};

class MpiProgressEngine {
public:
    void start(bool use_thread);
    void stop();
    bool threaded() const { return m_use_thread; }
    void submit(const std::shared_ptr<MpiOp>& op);
    void wait(MpiOp& op);
    // Poll mode: test what is outstanding. In thread mode this is the progress thread's job.
    void progress();

private:
    void begin(const std::shared_ptr<MpiOp>& op);
    void finish(MpiOp& op);
    bool test_active();  // whether anything completed
    void check_watchdog();
    void loop();

    bool m_use_thread = true;
    double m_timeout_s = 300;
    std::mutex m_mutex;
    std::condition_variable m_submitted, m_completed;
    std::deque<std::shared_ptr<MpiOp>> m_incoming;
    std::vector<std::shared_ptr<MpiOp>> m_active;
    std::vector<MPI_Request> m_requests;
    bool m_stopping = false;
    // Compute threads blocked in wait(), and since when (steady clock, ns; 0 none): for the first kSpinNs of a wait
    // its core is idle and the progress thread polls without sleeping (a 1 MiB shared-memory transfer moves a
    // fragment per poll: paced by the sleep, it took 0.7 ms).
    static constexpr int64_t kSpinNs = 1000000;  // 1 ms
    std::atomic<int> m_waiters{0};
    std::atomic<int64_t> m_wait_since_ns{0};
    std::thread m_thread;
};

// The process's one engine (MPI is initialised once per process).
MpiProgressEngine& mpi_progress_engine();

}  // namespace us
