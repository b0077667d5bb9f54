// The agent's TCP protocol (docs/attach-pytorch.md, "Agent protocol"): frames of a little-endian uint32 length and
// that many bytes. The client sends one JSON frame {"version", "token", "op", ...}; the agent answers with JSON
// frames ({"progress": TEXT} while it works, then {"ok": true, ...} or {"ok": false, "error": TEXT}) and, after a
// capture's final frame, one frame per file it lists. A frame from a peer not yet authenticated is at most 64 KiB.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/capture/node_capture.h"
#include "profiler/ondemand/poller_registry.h"

namespace us::app {

inline constexpr int kAgentProtocolVersion = 1;
inline constexpr int kAgentDefaultPort = 7321;
inline constexpr uint32_t kAgentMaxRequestBytes = 64 * 1024;
inline constexpr uint32_t kAgentMaxFrameBytes = 1u << 31;  // a rank's trace; more is not a trace we can open

struct AgentRequest {
    std::string token;
    std::string op;   // "jobs" | "capture"
    std::string job;  // capture: the job's id ("" = the only one)
    int steps = 3, roundup = 100;
    double timeout_s = 120;
};

nlohmann::json agent_request_json(const AgentRequest& request);
// The jobs polling a node, as the agent's "jobs" answer lists them (and the GUI's Attach window reads them, from an
// agent or from its own endpoint): {"id", "jobid", "expected_ranks", "describe", "ranks": [...], "launchers": [...]},
// each process {"pid", "rank", "world_size", "local_rank", "command", "alive", "polls", "last_seen_s"}.
nlohmann::json jobs_json(const std::vector<prof::PolledJob>& jobs);
// A rank's state in a capture's progress frame ({"rank", "pid", "state", "requests", "file"}); false for JSON that
// is not one.
nlohmann::json rank_progress_json(const RankProgress& rank);
bool parse_rank_progress(const nlohmann::json& j, RankProgress& out);
// Reads a request; false and `error` (to send back) when it is malformed or from another protocol version. The
// token is not checked here (agent_token_matches).
bool parse_agent_request(const std::string& frame, AgentRequest& out, std::string& error);
bool agent_token_matches(const std::string& presented, const std::string& token);  // constant time

// Frames on a blocking socket, each within timeout_ms. read_frame refuses (false, `error`) a length over max_bytes.
bool write_frame(int fd, const std::string& bytes, int timeout_ms);
bool read_frame(int fd, std::string& bytes, uint32_t max_bytes, int timeout_ms, std::string& error);

}  // namespace us::app
