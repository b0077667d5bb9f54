// Opening a run a rank at a time, for the GUI: worker threads (one per core and at most 4, one per file at most, below
// the drawing thread's priority) each read whole files into a trace store of their own; the thread that draws moves
// every finished rank into the store it shows with take_ready(). The shown store thus only changes on the thread
// that reads it, between frames, as a live run's does (LiveRun::pump): the timeline draws the first rank while the
// others load, and nothing is shared but a locked queue of finished ranks and a few counters.
// A file that fails (damaged, no rank, a rank given twice) is reported, naming it, and skipped: the ranks read
// before and after it stay usable. Cancelling (or destroying the load) stops every worker within one read.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "profiler/import/one_run.h"
#include "profiler/import/rank_file.h"
#include "profiler/trace/trace_store.h"

namespace us::prof {

struct LoadProgress {
    size_t files_total = 0;  // 0 until the run's files are found
    size_t files_done = 0;   // read and moved into the shown store, or failed
    size_t files_failed = 0;
    size_t ranks_shown = 0;    // in the shown store
    uint64_t bytes_total = 0;  // on disk (gzip counts compressed)
    uint64_t bytes_read = 0;   // on disk, consumed so far
    double seconds = 0;        // since the load started
    bool finished = false;     // every file done and everything taken (or cancelled)
};

class ProgressiveLoad {
public:
    // Starts reading the run named by `paths` (what load_run takes: Kineto files, their folders, or one Ultrascope
    // trace, which arrives whole). `threads` 0: one per core, at most 4. With several files, each rank's store gets an
    // even share of `options.max_bytes` (rank_store_options, as load_run gives them).
    ProgressiveLoad(std::vector<std::string> paths, TraceStoreOptions options, int threads = 0);
    ~ProgressiveLoad();  // cancels and joins: no worker outlives the load
    ProgressiveLoad(const ProgressiveLoad&) = delete;
    ProgressiveLoad& operator=(const ProgressiveLoad&) = delete;

    // Stops reading: a file being read stops at its next read (256 KiB of input); what was taken stays.
    void cancel();
    // Moves the ranks read since the last call into `store` (finalized); returns how many files they came from.
    size_t take_ready(TraceStore& store);
    LoadProgress progress() const;
    bool finished() const { return progress().finished; }
    // Since the last call: warnings (as load_run's), and errors, one per failed file, each naming it.
    std::vector<std::string> take_warnings();
    std::vector<std::string> take_errors();
    // Since the last call: the [memory] events of the ranks read (rank_file.h), for the memory views.
    std::vector<KinetoMemoryEvents> take_memory_events();

private:
    void find_files();  // on the first worker: the run's files, then every worker starts on them
    void work();
    void read_file(size_t index);
    void fail(std::string message);

    std::vector<std::string> m_paths;
    TraceStoreOptions m_options;
    std::chrono::steady_clock::time_point m_started;
    std::atomic<bool> m_cancel{false};
    std::atomic<uint64_t> m_bytes_read{0};
    std::atomic<size_t> m_next{0};
    int m_threads = 1;
    std::thread m_lead;  // finds the files, starts the other workers, then reads like them

    mutable std::mutex m_mutex;          // guards everything below
    std::vector<std::thread> m_workers;  // added by m_lead only, joined after it
    std::vector<std::string> m_files;
    bool m_ultrascope = false;
    uint64_t m_bytes_total = 0;
    size_t m_taken = 0, m_failed = 0, m_ranks_shown = 0;
    int m_running = 0;  // workers not yet ended
    std::vector<std::unique_ptr<TraceStore>> m_ready;
    RankClaims m_claims;                // one file per rank
    std::vector<RankWindow> m_windows;  // the ranks merged so far, on their hosts' clocks: one run (one_run.h)
    bool m_apart_said = false;          // ranks of one host that profiled apart: warned once
    std::vector<KinetoMemoryEvents> m_memory;
    std::vector<std::string> m_warnings, m_errors;
    double m_finished_at = -1;
};

}  // namespace us::prof
