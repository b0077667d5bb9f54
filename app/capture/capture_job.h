// The capture as a job a caller drives and watches: capture_job does what `ultrascope capture` does (every node's
// part, the ranks written into one folder, taken again with a larger roundup when the ranks captured different
// steps) and reports it as events rather than printing: a line per change, each rank's state, a retry. The CLI
// (capture_run.cpp) prints the events; the GUI's Attach window runs capture_job on a worker thread and draws them.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "app/capture/agent_client.h"
#include "app/capture/capture_output.h"
#include "app/capture/capture_run.h"
#include "profiler/ondemand/ondemand_daemon.h"

namespace us::app {

struct CaptureEvent {
    enum class Kind { line, rank, retried };
    Kind kind = Kind::line;
    std::string node;   // the agent's HOST:PORT; "" for this node without an agent named
    std::string text;   // line: as `ultrascope capture` prints it; retried: which ranks differ and how
    RankProgress rank;  // rank: its state (a line with the same news follows)
    int roundup = 0;    // retried: the roundup that gave different steps (the next is four times larger)
};

struct CaptureCallbacks {
    // Called on the capture's threads (one per agent, at once): the receiver locks what it shares.
    std::function<void(const CaptureEvent&)> on_event;
    const std::atomic<bool>* cancel = nullptr;  // set: the capture gives up ("cancelled"); nothing is written
    // This node's endpoint when the caller owns it already (the Attach window lists the jobs through it); else the
    // capture owns it for its duration, or asks this node's agent.
    prof::OnDemandDaemon* daemon = nullptr;
};

struct CaptureOutcome {
    bool ok = false;     // the folder is written (its ranks may still differ: written.same_steps)
    std::string error;   // !ok: what went wrong and what to do, as the CLI says it
    std::string folder;  // options.out
    std::string job_id;
    int roundup = 0;  // the last one asked for
    CaptureWritten written;
};

// The agents named (HOST:PORT) with their token: --token, ULTRASCOPE_AGENT_TOKEN, or this node's agent's own.
// UserError when one has no token.
std::vector<AgentAddress> capture_agents(const CaptureOptions& options);

// UserError (nothing written) on bad options or a failed capture: the CLI's path.
CaptureOutcome capture_job_or_throw(const CaptureOptions& options, const CaptureCallbacks& callbacks);
// The same, every failure in `error`: the GUI's path.
CaptureOutcome capture_job(const CaptureOptions& options, const CaptureCallbacks& callbacks) noexcept;

}  // namespace us::app
