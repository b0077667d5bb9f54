// The client of `ultrascope agent` (agent_client.h).
#include "app/capture/agent_client.h"

#include <fmt/core.h>
#include <poll.h>

#include "app/capture/agent_protocol.h"
#include "common/core/check.h"
#include "profiler/transport/socket.h"

namespace us::app {
namespace {

prof::Socket open_request(const AgentAddress& agent, const AgentRequest& request, std::string& error) {
    prof::Socket s = prof::connect_to({agent.host, agent.port}, 5000, error);
    if (!s.valid()) {
        error =
            fmt::format("cannot reach the agent at {}: {} (is `ultrascope agent` running there?)", agent.name(), error);
        return s;
    }
    if (!write_frame(s.fd(), agent_request_json(request).dump(), 10000)) {
        error = fmt::format("the agent at {} closed the connection", agent.name());
        return prof::Socket();
    }
    return s;
}

// The next JSON frame; false with `error` on a broken connection or bytes that are not JSON.
bool next_json(const AgentAddress& agent, int fd, int timeout_ms, nlohmann::json& out, std::string& error) {
    std::string frame;
    if (!read_frame(fd, frame, kAgentMaxRequestBytes * 16, timeout_ms, error)) {
        error = fmt::format("the agent at {}: {}", agent.name(), error);
        return false;
    }
    out = nlohmann::json::parse(frame, nullptr, false);
    if (out.is_discarded() || !out.is_object()) {
        error = fmt::format("the agent at {} sent something that is not its protocol", agent.name());
        return false;
    }
    return true;
}

// Until the next frame starts, or `node.cancel` is set (then false: the connection closes, and the agent, which
// watches it, ends its capture and disarms the ranks). A quiet agent is left to next_json's own timeout.
bool wait_readable(int fd, int quiet_ms, const NodeCaptureRequest& node, std::string& error) {
    if (!node.cancel) return true;
    for (int waited = 0; waited < quiet_ms; waited += 200) {
        if (*node.cancel) {
            error = node.cancelled_why;
            return false;
        }
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 200) != 0) return true;  // readable, closed, or an error next_json names
    }
    return true;
}

// A capture's frames from the agent: its progress, then the files it lists, each whole.
NodeCaptureResult agent_capture_frames(const AgentAddress& agent, const NodeCaptureRequest& node,
                                       const CaptureProgress& progress) {
    NodeCaptureResult result;
    AgentRequest request{agent.token, "capture", node.job, node.steps, node.roundup, node.timeout_s};
    prof::Socket s = open_request(agent, request, result.error);
    if (!s.valid()) return result;
    // The agent speaks at least at every change of a rank's state and ends by its own timeout: wait a little longer.
    const int quiet_ms = int(node.timeout_s * 1000) + 30000;
    nlohmann::json frame;
    for (;;) {
        if (!wait_readable(s.fd(), quiet_ms, node, result.error) ||
            !next_json(agent, s.fd(), quiet_ms, frame, result.error))
            return result;
        if (!frame.contains("progress")) break;
        if (RankProgress rank; node.on_rank && frame.contains("rank") && parse_rank_progress(frame["rank"], rank))
            node.on_rank(rank);
        progress(frame["progress"].is_string() ? frame["progress"].get<std::string>() : frame["progress"].dump());
    }
    if (!frame.value("ok", false)) {
        result.error = fmt::format("the agent at {}: {}", agent.name(), frame.value("error", std::string("failed")));
        return result;
    }
    result.job_id = frame.value("job", std::string());
    if (!frame.contains("files") || !frame["files"].is_array()) {
        result.error = fmt::format("the agent at {} listed no files", agent.name());
        return result;
    }
    for (const nlohmann::json& f : frame["files"]) {
        CapturedTrace r;
        r.rank = f.value("rank", -1), r.world_size = f.value("world_size", 0), r.local_rank = f.value("local_rank", -1);
        r.pid = f.value("pid", 0), r.host = f.value("host", std::string());
        r.raw_trace =
            fmt::format("rank {}'s trace (pid {} on {}, from the agent at {})", r.rank, r.pid, r.host, agent.name());
        const uint64_t bytes = f.value("bytes", uint64_t(0));
        std::string error;
        if (bytes > kAgentMaxFrameBytes || !read_frame(s.fd(), r.raw_bytes, uint32_t(bytes), 600000, error) ||
            r.raw_bytes.size() != bytes) {
            result.error = fmt::format("the agent at {} did not send rank {}'s file whole: {}", agent.name(), r.rank,
                                       error.empty() ? "its size differs" : error);
            result.ranks.clear();
            return result;
        }
        result.ranks.push_back(std::move(r));
    }
    result.ok = true;
    return result;
}

}  // namespace

nlohmann::json agent_jobs(const AgentAddress& agent) {
    AgentRequest request;
    request.token = agent.token;
    request.op = "jobs";
    std::string error;
    prof::Socket s = open_request(agent, request, error);
    nlohmann::json answer;
    US_CHECK_INPUT(s.valid() && next_json(agent, s.fd(), 10000, answer, error), "{}", error);
    try {
        US_CHECK_INPUT(answer.value("ok", false), "the agent at {} refused: {}", agent.name(),
                       answer.value("error", std::string("no reason given")));
        US_CHECK_INPUT(answer.contains("jobs") && answer["jobs"].is_array(), "the agent at {} listed no jobs",
                       agent.name());
        for (const nlohmann::json& job : answer["jobs"]) (void)job.value("describe", std::string());  // of its shape
    } catch (const nlohmann::json::exception& e) {
        throw UserError(
            fmt::format("the agent at {} answered in another shape than its protocol's ({}): is it "
                        "the same ultrascope version?",
                        agent.name(), e.what()));
    }
    return answer;
}

NodeCaptureResult agent_capture(const AgentAddress& agent, const NodeCaptureRequest& node,
                                const CaptureProgress& progress) {
    // The agent's frames are read field by field; a field of another type than the protocol's (another version, or
    // not an agent at all) is this node's error, not the capture's end.
    try {
        return agent_capture_frames(agent, node, progress);
    } catch (const nlohmann::json::exception& e) {
        NodeCaptureResult result;
        result.error =
            fmt::format("the agent at {} answered in another shape than its protocol's ({})", agent.name(), e.what());
        return result;
    }
}
}  // namespace us::app
