// The CLI's (and later the GUI's) side of the agent protocol: ask an agent for its jobs, or for a capture whose
// progress lines arrive as they happen and whose files come back over the same connection.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "app/capture/node_capture.h"

namespace us::app {

struct AgentAddress {
    std::string host;
    int port = 0;
    std::string token;
    std::string name() const { return host + ":" + std::to_string(port); }
};

// The agent's "jobs" answer ({"ok", "host", "jobs": [...]}); UserError naming the agent when it cannot be reached
// or refuses (a wrong token, another protocol version).
nlohmann::json agent_jobs(const AgentAddress& agent);
// A capture through the agent; a result with ok false and the agent's (or the connection's) reason on failure.
NodeCaptureResult agent_capture(const AgentAddress& agent, const NodeCaptureRequest& request,
                                const CaptureProgress& progress);

}  // namespace us::app
