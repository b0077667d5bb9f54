// A capture on one node, given its daemon: wait until the job's ranks poll, arm every rank (never the launcher),
// keep asking on each poll until every rank's file exists, read the files back and remove them. Shared by
// `ultrascope agent` (for a client over TCP) and `ultrascope capture` (owning the node's endpoint itself).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "app/capture/captured_trace.h"
#include "profiler/ondemand/ondemand_daemon.h"

namespace us::app {

// A rank's state while its node captures it, for a caller that draws it (the GUI's Attach window) rather than
// reading the progress lines: armed and waiting for its next poll, asked again on each poll (Kineto drops a request
// that comes before its first optimizer step), tracing (Kineto opened the file), its file written.
enum class RankState { waiting_for_poll, asked, tracing, written };
const char* rank_state_name(RankState state);  // "waiting for poll", "asked again", "tracing", "written"

struct RankProgress {
    int rank = -1, pid = 0;
    RankState state = RankState::waiting_for_poll;
    int requests = 0;  // polls answered with the request so far
    std::string file;  // written: Kineto's file on the node
};

using CaptureProgress = std::function<void(const std::string& line)>;
using RankProgressFn = std::function<void(const RankProgress& rank)>;

struct NodeCaptureRequest {
    std::string job;  // "" = the only job polling
    int steps = 3, roundup = 100;
    double timeout_s = 120;
    const std::atomic<bool>* cancel = nullptr;  // set: give up now
    std::string cancelled_why = "the agent is stopping";
    RankProgressFn on_rank;  // each change of a rank's state, just before its progress line (may be empty)
};

struct NodeCaptureResult {
    bool ok = false;
    std::string error;  // when !ok: what went wrong and what to do
    std::string job_id;
    std::vector<CapturedTrace> ranks;
};

NodeCaptureResult capture_on_node(prof::OnDemandDaemon& daemon, const NodeCaptureRequest& request,
                                  const CaptureProgress& progress);

// The jobs polling, as JSON (the agent's "jobs" answer and `ultrascope capture --list`).
std::string this_host_name();

}  // namespace us::app
