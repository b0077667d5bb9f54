// One capture of the Attach window, run on a worker thread (app/capture/capture_job.h): what the window draws
// while it waits (each node's last line, each rank's state and its last line, the retries) and, once it ends, the
// folder written or the CLI's message saying why not. Cancel gives up at the next check (a fraction of a second).
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "app/capture/capture_job.h"

namespace us::gui {

struct CaptureRankRow {
    std::string node;
    int rank = -1, pid = 0;
    app::RankState state = app::RankState::waiting_for_poll;
    int requests = 0;
    std::string line;  // the rank's last progress line, as the CLI prints it
};

struct CaptureProgressView {
    std::vector<std::string> node_lines;  // each node's last line that names no rank
    std::vector<CaptureRankRow> ranks;    // by node, then rank
    std::vector<std::string> retries;
    double seconds = 0;
};

class CaptureWorker {
public:
    ~CaptureWorker();
    // Starts a capture (a finished one's outcome must have been taken); `daemon`: this node's endpoint when the
    // caller owns it.
    void start(const app::CaptureOptions& options, prof::OnDemandDaemon* daemon);
    void cancel() { m_cancel = true; }
    bool running() const { return m_running; }
    bool cancelling() const { return m_running && m_cancel; }
    CaptureProgressView progress() const;
    std::optional<app::CaptureOutcome> take_outcome();  // once, when it has ended
    bool has_outcome() const;                           // ended, its outcome not yet taken
    const app::CaptureOptions& options() const { return m_options; }

private:
    void on_event(const app::CaptureEvent& e);

    app::CaptureOptions m_options;
    std::thread m_thread;
    std::atomic<bool> m_cancel{false}, m_running{false};
    double m_started_at = 0;
    mutable std::mutex m_mutex;  // what follows, written by the capture's threads
    std::map<std::string, std::string> m_node_lines;
    std::map<std::pair<std::string, int>, CaptureRankRow> m_ranks;  // (node, pid)
    std::vector<std::string> m_retries;
    std::optional<app::CaptureOutcome> m_outcome;
};

}  // namespace us::gui
