#include "engine/comm/mpi_progress.h"

#include <sys/prctl.h>
#include <time.h>

#include <cstdlib>

#include "common/core/check.h"

namespace us {

namespace {
int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}
}  // namespace

void MpiProgressEngine::start(bool use_thread) {
    m_use_thread = use_thread;
    const char* limit = std::getenv("ULTRASCOPE_COMM_TIMEOUT_S");
    m_timeout_s = limit ? std::atof(limit) : 300.0;
    if (m_use_thread) m_thread = std::thread([this] { loop(); });
}

void MpiProgressEngine::stop() {
    {
        std::lock_guard lock(m_mutex);
        m_stopping = true;
    }
    m_submitted.notify_all();
    if (m_thread.joinable()) m_thread.join();
}

void MpiProgressEngine::submit(const std::shared_ptr<MpiOp>& op) {
    op->context = prof::context();
    op->submit_ticks = prof::enabled() ? prof::read_ticks() : 0;
    op->submitted = std::chrono::steady_clock::now();
    if (!m_use_thread) {
        begin(op);
        return;
    }
    {
        std::lock_guard lock(m_mutex);
        m_incoming.push_back(op);
    }
    m_submitted.notify_one();
}

void MpiProgressEngine::wait(MpiOp& op) {
    if (op.done.load(std::memory_order_acquire)) return;
    const bool record = prof::enabled();
    const int64_t t0 = record ? prof::read_ticks() : 0;
    if (m_use_thread) {
        if (m_waiters.fetch_add(1, std::memory_order_acq_rel) == 0) m_wait_since_ns.store(now_ns());
        {
            std::unique_lock lock(m_mutex);
            m_completed.wait(lock, [&] { return op.done.load(std::memory_order_acquire); });
        }
        if (m_waiters.fetch_sub(1, std::memory_order_acq_rel) == 1) m_wait_since_ns.store(0);
    } else {
        while (!op.done.load(std::memory_order_acquire)) {
            progress();
            std::this_thread::yield();
        }
    }
    if (record)
        prof::record_span(prof::Lane::compute, prof::SpanKind::wait, op.op, US_PROF_NAME("wait for communication"), t0,
                          prof::read_ticks(), 0, op.bytes, op.peer, op.group);
}

void MpiProgressEngine::progress() {
    if (m_use_thread || m_active.empty()) return;
    test_active();
}

void MpiProgressEngine::begin(const std::shared_ptr<MpiOp>& op) {
    US_MPI_CHECK(op->start(&op->request));
    m_active.push_back(op);
    m_requests.push_back(op->request);
}

void MpiProgressEngine::finish(MpiOp& op) {
    if (op.submit_ticks != 0 && prof::enabled()) {
        prof::RecordContext& ctx = prof::context();
        const prof::RecordContext saved = ctx;
        ctx = op.context;  // the span belongs to the step, micro-batch and layer that launched it
        // A caller's name for the operation (e.g. "reduce_from_tp_region") wins over the generic one.
        const uint32_t name = op.context.op_name != UINT32_MAX ? op.context.op_name : prof::string_id(op.what);
        prof::record_span(op.lane, prof::SpanKind::comm, op.op, name, op.submit_ticks, prof::read_ticks(), 0, op.bytes,
                          op.peer, op.group);
        ctx = saved;
    }
    if (op.group_pending) op.group_pending->fetch_sub(1, std::memory_order_acq_rel);
    {
        std::lock_guard lock(m_mutex);
        op.done.store(true, std::memory_order_release);
    }
    m_completed.notify_all();
}

bool MpiProgressEngine::test_active() {
    int count = 0;
    std::vector<int> indices(m_requests.size());
    US_MPI_CHECK(MPI_Testsome(int(m_requests.size()), m_requests.data(), &count, indices.data(), MPI_STATUSES_IGNORE));
    if (count == MPI_UNDEFINED || count == 0) {
        check_watchdog();
        return false;
    }
    std::vector<bool> finished(m_requests.size(), false);
    for (int i = 0; i < count; ++i) finished[size_t(indices[size_t(i)])] = true;
    std::vector<std::shared_ptr<MpiOp>> still;
    std::vector<MPI_Request> still_requests;
    for (size_t i = 0; i < m_active.size(); ++i) {
        if (finished[i])
            finish(*m_active[i]);
        else {
            still.push_back(m_active[i]);
            still_requests.push_back(m_requests[i]);
        }
    }
    m_active.swap(still);
    m_requests.swap(still_requests);
    return true;
}

void MpiProgressEngine::check_watchdog() {
    const auto now = std::chrono::steady_clock::now();
    for (const auto& op : m_active)
        if (std::chrono::duration<double>(now - op->submitted).count() > m_timeout_s)
            MpiRuntime::abort(4, fmt::format("{} has not completed after {:.0f} s: a peer rank is gone or stuck "
                                             "(set ULTRASCOPE_COMM_TIMEOUT_S to wait longer)",
                                             op->what, m_timeout_s));
}

void MpiProgressEngine::loop() {
    prctl(PR_SET_TIMERSLACK, 1000UL);  // sleep for what we ask, not 50 us more
    prof::context() = prof::RecordContext{};
    for (;;) {
        std::deque<std::shared_ptr<MpiOp>> fresh;
        {
            std::unique_lock lock(m_mutex);
            if (m_active.empty()) m_submitted.wait(lock, [&] { return m_stopping || !m_incoming.empty(); });
            if (m_stopping && m_incoming.empty() && m_active.empty()) return;
            fresh.swap(m_incoming);
        }
        for (auto& op : fresh) begin(op);  // in submission order: every rank starts collectives alike
        if (m_active.empty()) continue;
        if (!test_active()) {
            // Nothing finished. While a compute thread has just begun to wait, its core is free: poll again at
            // once (a shared-memory transfer moves a fragment per poll), for at most kSpinNs, so a long wait (a
            // pipeline's bubble) does not keep taking a core the other ranks' compute may need when ranks
            // outnumber free cores. Otherwise give the cores back to compute for a moment, short enough that a
            // ring step of a collective is not held up for long (docs/communication.md).
            const int64_t since = m_wait_since_ns.load(std::memory_order_acquire);  // 0: nobody waits
            if (since != 0 && now_ns() - since < kSpinNs) {
                std::this_thread::yield();
                continue;
            }
            const timespec pause{0, 20000};
            nanosleep(&pause, nullptr);
        }
    }
}

MpiProgressEngine& mpi_progress_engine() {
    static MpiProgressEngine e;
    return e;
}

bool MpiOp::test() {
    mpi_progress_engine().progress();
    return done.load(std::memory_order_acquire);
}
void MpiOp::wait() { mpi_progress_engine().wait(*this); }

}  // namespace us
