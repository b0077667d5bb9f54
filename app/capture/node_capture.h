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

struct NodeCaptureRequest {
    std::string job;  // "" = the only job polling
    int steps = 3, roundup = 100;
    double timeout_s = 120;
    const std::atomic<bool>* cancel = nullptr;  // set: give up now (the agent is stopping)
};

struct NodeCaptureResult {
    bool ok = false;
    std::string error;  // when !ok: what went wrong and what to do
    std::string job_id;
    std::vector<CapturedTrace> ranks;
};

using CaptureProgress = std::function<void(const std::string& line)>;

NodeCaptureResult capture_on_node(prof::OnDemandDaemon& daemon, const NodeCaptureRequest& request,
                                  const CaptureProgress& progress);

// The jobs polling, as JSON (the agent's "jobs" answer and `ultrascope capture --list`).
std::string this_host_name();

}  // namespace us::app
