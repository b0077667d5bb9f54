// File > Attach to a PyTorch job: the window's state. It lists the jobs polling this node's endpoint (or the agents
// named), captures N steps of the one picked into a folder of rank files (a per-session folder under the user's
// cache, or one the user names), and hands the folder over to be opened as a run, as opening a folder of rank files
// does. Repeated captures of a job are numbered ("capture 2 of job X"), each a run of its own: the Compare tab
// holds them side by side.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>

#include "app/gui/state/capture_worker.h"
#include "app/gui/state/job_listing.h"

namespace us::gui {

// Where the captures of this session go: $XDG_CACHE_HOME (else ~/.cache)/ultrascope/captures.
std::string default_captures_dir();

class AttachState {
public:
    bool open = false;
    // What the window edits.
    std::string agents;  // HOST:PORT,...; "" = this node
    std::string token;
    int steps = 3;
    std::string out_dir;  // "" = default_captures_dir()/JOB-TIMESTAMP
    double timeout_s = 120;
    int auto_capture_steps = 0;  // --capture-steps N: capture the only job as soon as the window opens,
    int auto_capture_count = 1;  // --capture-count K times, each once the last one's run is open

    JobListing listing;
    CaptureWorker worker;
    std::string error;         // the last capture's failure, as the CLI says it
    std::string last_message;  // the last capture's summary (steps that differ, ...)

    void show();                              // opens the window and starts listing (what `agents` names)
    void relist();                            // `agents` or `token` changed, or Refresh
    void capture(const std::string& job_id);  // "" = the only job
    // Once a frame: the listing, and a capture that ended. A folder to open as a run, with its label, once.
    struct Captured {
        std::string folder, label;
    };
    // `source_idle`: no run is being opened (the next --capture-count capture waits for it).
    std::optional<Captured> poll(bool source_idle);
    // The picture will change without input: a capture runs or is due, or the window has listened for less than
    // a first look (the jobs' polls come every 1 to 5 s).
    bool busy() const;
    // A capture's failure, once (the message log shows it too, and a screenshot run exits non-zero).
    std::optional<std::string> take_failure() { return std::exchange(m_failure, std::nullopt); }
    int captures_of(const std::string& job_id) const;

private:
    bool auto_pending() const { return open && auto_capture_steps > 0 && m_auto_started < auto_capture_count; }

    std::map<std::string, int> m_captures;  // of each job this session
    int m_auto_started = 0;                 // of auto_capture_count
    std::optional<std::string> m_failure;
};

}  // namespace us::gui
