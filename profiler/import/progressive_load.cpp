// A run read a rank at a time on worker threads (progressive_load.h). Each worker takes the next file, streams it
// through the Kineto reader into a store of its own and queues that store; the drawing thread merges queued stores
// into the one it shows (TraceStore::merge: a pass over the rank's spans to re-intern names, no sort).
#include "profiler/import/progressive_load.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <utility>
#include <filesystem>
#include <fmt/format.h>

#include "common/core/check.h"
#include "profiler/import/byte_source.h"
#include "profiler/import/rank_file.h"
#include "profiler/import/run_files.h"

namespace us::prof {

namespace {

// A worker yields to the thread that draws (and to a run training beside it): its nice value goes up by 10.
// Linux keeps a nice value per thread; elsewhere this does nothing.
void lower_this_thread_priority() {
#ifdef __linux__
    const auto tid = id_t(::syscall(SYS_gettid));
    ::setpriority(PRIO_PROCESS, tid, std::min(19, ::getpriority(PRIO_PROCESS, tid) + 10));
#endif
}

}  // namespace

ProgressiveLoad::ProgressiveLoad(std::vector<std::string> paths, TraceStoreOptions options, int threads)
    : m_paths(std::move(paths)), m_options(options), m_started(std::chrono::steady_clock::now()) {
    // At most 4 by default: each file being read holds its parsed events and its store (about 1.8x its JSON at
    // 100 MB), so 4 at once keep 16 ranks x 100 MB under the JSON's size in memory, and 4 cores read 1.6 GB in ~1 s.
    m_threads = threads > 0 ? threads : int(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
    m_running = 1;
    // The first worker finds the files (a folder's listing reads the head of each file), then starts the others.
    m_lead = std::thread([this] {
        lower_this_thread_priority();
        find_files();
        work();
    });
}

ProgressiveLoad::~ProgressiveLoad() {
    cancel();
    // The lead may still be adding the others: join it first, then the rest (no longer changing).
    if (m_lead.joinable()) m_lead.join();
    for (auto& w : m_workers)
        if (w.joinable()) w.join();
}

void ProgressiveLoad::cancel() { m_cancel.store(true); }

void ProgressiveLoad::fail(std::string message) {
    std::lock_guard lock(m_mutex);
    m_errors.push_back(std::move(message));
    ++m_failed;
}

void ProgressiveLoad::find_files() {
    RunFiles run;
    try {
        run = find_run_files(m_paths);
    } catch (const UserError& e) {
        fail(e.what());
    }
    uint64_t bytes = 0;
    for (const auto& f : run.files) {
        std::error_code ec;
        const auto size = std::filesystem::file_size(f, ec);
        if (!ec) bytes += size;
    }
    std::lock_guard lock(m_mutex);
    m_files = std::move(run.files);
    m_ultrascope = run.ultrascope;
    m_bytes_total = bytes;
    m_warnings.insert(m_warnings.end(), run.warnings.begin(), run.warnings.end());
    // The others start only now: m_files no longer changes, so workers read it without the lock. The destructor
    // joins this thread before it touches m_workers.
    const int more = std::min<int>(m_threads, int(m_files.size())) - 1;
    for (int i = 0; i < more && !m_cancel.load(); ++i) {
        ++m_running;
        m_workers.emplace_back([this] {
            lower_this_thread_priority();
            work();
        });
    }
}

void ProgressiveLoad::work() {
    for (size_t i; !m_cancel.load() && (i = m_next.fetch_add(1)) < m_files.size();) read_file(i);
    std::lock_guard lock(m_mutex);
    --m_running;
    if (m_running == 0 && m_finished_at < 0)
        m_finished_at = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_started).count();
}

void ProgressiveLoad::read_file(size_t index) {
    const std::string& path = m_files[index];
    try {
        std::vector<std::string> warnings;
        std::unique_ptr<TraceStore> store;
        KinetoMemoryEvents memory;
        if (m_ultrascope) {
            store = std::make_unique<TraceStore>(m_options);
            warnings = load_trace(path, *store);
            std::error_code ec;
            m_bytes_read += std::filesystem::file_size(path, ec);
        } else {  // the one rank-file reader every command uses (rank_file.h)
            RankFile rank = read_rank_file(path, m_files.size(), m_options, m_claims, &m_bytes_read, &m_cancel);
            store = std::move(rank.store);
            memory = std::move(rank.memory);
            warnings = std::move(rank.warnings);
        }
        std::lock_guard lock(m_mutex);
        m_ready.push_back(std::move(store));
        if (!memory.events.empty()) m_memory.push_back(std::move(memory));
        m_warnings.insert(m_warnings.end(), warnings.begin(), warnings.end());
    } catch (const LoadCancelled&) {
    } catch (const UserError& e) {
        const std::string what = e.what();
        fail(what.find(path) != std::string::npos ? what : fmt::format("'{}': {}", path, what));
    } catch (const std::exception& e) {
        fail(fmt::format("cannot read '{}': {}", path, e.what()));
    }
}

std::vector<KinetoMemoryEvents> ProgressiveLoad::take_memory_events() {
    std::lock_guard lock(m_mutex);
    return std::exchange(m_memory, {});
}

size_t ProgressiveLoad::take_ready(TraceStore& store) {
    std::vector<std::unique_ptr<TraceStore>> ready;
    {
        std::lock_guard lock(m_mutex);
        ready.swap(m_ready);
    }
    size_t ranks = 0, merged = 0;  // a store refused below is a failed file, not a taken one
    for (auto& s : ready) {
        const size_t n = s->ranks().size();
        // A rank of another run (or another cycle of the profiler's schedule) is not merged into this one.
        std::vector<RankWindow> windows = m_windows;
        for (RankWindow& w : rank_windows(*s)) windows.push_back(std::move(w));
        if (OneRunCheck check = first_not_one_run(windows); !check.said.empty()) {
            if (check.two_runs) {
                fail(check.said);
                continue;
            }
            std::lock_guard lock(m_mutex);
            if (!std::exchange(m_apart_said, true))
                m_warnings.push_back(std::move(check.said));  // once, not each merge
        }
        try {
            store.merge(std::move(*s));
            m_windows = std::move(windows);
            ranks += n, ++merged;
        } catch (const UserError& e) {  // a rank the shown store already had (from another source)
            fail(e.what());
        }
    }
    std::lock_guard lock(m_mutex);
    m_taken += merged;
    m_ranks_shown += ranks;
    return ready.size();
}

LoadProgress ProgressiveLoad::progress() const {
    std::lock_guard lock(m_mutex);
    LoadProgress p;
    p.files_total = m_files.size();
    p.files_failed = m_failed;
    p.files_done = std::min(m_files.size(), m_taken + m_failed);
    p.ranks_shown = m_ranks_shown;
    p.bytes_total = m_bytes_total;
    p.bytes_read = m_bytes_total > 0 ? std::min(m_bytes_read.load(), m_bytes_total) : m_bytes_read.load();
    p.finished = m_running == 0 && m_ready.empty();
    p.seconds = p.finished && m_finished_at >= 0
                    ? m_finished_at
                    : std::chrono::duration<double>(std::chrono::steady_clock::now() - m_started).count();
    return p;
}

std::vector<std::string> ProgressiveLoad::take_warnings() {
    std::lock_guard lock(m_mutex);
    return std::exchange(m_warnings, {});
}

std::vector<std::string> ProgressiveLoad::take_errors() {
    std::lock_guard lock(m_mutex);
    return std::exchange(m_errors, {});
}

}  // namespace us::prof
