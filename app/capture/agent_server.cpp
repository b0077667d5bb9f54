// The agent's TCP side (agent_server.h): one request per connection, answered on a thread of its own so that a
// capture, which can take minutes, never holds up a listing.
#include "app/capture/agent_server.h"

#include <arpa/inet.h>
#include <fmt/core.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <utility>

#include <thread>
#include <vector>

#include "app/capture/agent_protocol.h"
#include "app/capture/node_capture.h"
#include "profiler/transport/protocol.h"

namespace us::app {
namespace {

constexpr int kSendTimeoutMs = 30000;

void send_error(int fd, const std::string& error) {
    write_frame(fd, nlohmann::json{{"ok", false}, {"error", error}}.dump(), kSendTimeoutMs);
}

// Whether the client closed its end, waiting up to `timeout_ms`: it sends nothing after its request, so a readable
// socket is one at its end (or one that sent what no client sends).
bool client_hung_up(int fd, int timeout_ms) {
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return false;
    return (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLIN)) != 0;
}

// Cancels a capture when the agent stops or its client goes away (Ctrl-C in `ultrascope capture`, Cancel in the
// GUI), so that the ranks are disarmed now rather than at the capture's timeout.
class CaptureWatch {
public:
    CaptureWatch(int fd, const std::atomic<bool>& stopping, NodeCaptureRequest& node) {
        node.cancel = &m_cancel;
        m_thread = std::thread([this, fd, &stopping, &node] {
            while (!m_done) {
                const bool gone = client_hung_up(fd, 100);
                if (gone || stopping) {
                    node.cancelled_why = gone ? "the client closed the connection" : "the agent is stopping";
                    m_cancel = true;  // after the reason: the capture reads it once it sees the flag
                    return;
                }
            }
        });
    }
    ~CaptureWatch() {
        m_done = true;
        m_thread.join();
    }

private:
    std::atomic<bool> m_cancel{false}, m_done{false};
    std::thread m_thread;
};

}  // namespace

AgentServer::AgentServer(const AgentOptions& options, std::FILE* log)
    : m_options(options), m_log(log), m_daemon(options.socket_dir) {
    m_token = options.token.empty() ? prof::random_token() : options.token;
    US_CHECK_INPUT(m_token.size() == prof::kTokenBytes, "an agent token is {} characters (hex), not {}",
                   prof::kTokenBytes, m_token.size());
    m_listen = prof::listen_on(options.listen, options.port, m_port);
    if (!options.record.empty()) m_daemon.record_to(options.record);
    m_daemon.start();
}

AgentServer::~AgentServer() = default;

void AgentServer::run(const std::atomic<bool>& stop) {
    while (!stop) {
        for (const std::string& r : m_daemon.take_refusals()) std::fprintf(m_log, "agent: %s\n", r.c_str());
        pollfd p{m_listen.fd(), POLLIN, 0};
        if (::poll(&p, 1, 200) <= 0) continue;
        sockaddr_in from{};
        socklen_t len = sizeof(from);
        const int fd = ::accept4(m_listen.fd(), reinterpret_cast<sockaddr*>(&from), &len, SOCK_CLOEXEC);
        if (fd < 0) continue;
        char ip[INET_ADDRSTRLEN] = "?";
        ::inet_ntop(AF_INET, &from.sin_addr, ip, sizeof(ip));
        ++m_connections;
        std::thread([this, fd, peer = fmt::format("{}:{}", ip, ntohs(from.sin_port))] {
            try {
                handle(prof::Socket(fd), peer);
            } catch (
                const std::exception& e) {  // one connection's failure, never the agent's end (bytes from a network)
                std::fprintf(m_log, "agent: a request from %s failed: %s\n", peer.c_str(), e.what());
            }
            --m_connections;
        }).detach();
    }
    m_stopping = true;
    while (m_connections > 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

void AgentServer::handle(prof::Socket connection, const std::string& peer) {
    const int fd = connection.fd();
    std::string frame, error;
    AgentRequest request;
    if (!read_frame(fd, frame, kAgentMaxRequestBytes, 10000, error) || !parse_agent_request(frame, request, error)) {
        std::fprintf(m_log, "agent: refused a request from %s: %s\n", peer.c_str(), error.c_str());
        send_error(fd, error);
        return;
    }
    if (!agent_token_matches(request.token, m_token)) {
        std::fprintf(m_log, "agent: refused a request from %s: wrong token\n", peer.c_str());
        send_error(fd,
                   "wrong token: this agent's token is printed when it starts (give it with --token or "
                   "ULTRASCOPE_AGENT_TOKEN)");
        return;
    }
    if (request.op == "jobs") {
        write_frame(
            fd, nlohmann::json{{"ok", true}, {"host", this_host_name()}, {"jobs", jobs_json(m_daemon.jobs())}}.dump(),
            kSendTimeoutMs);
        return;
    }
    std::fprintf(m_log, "agent: %s asks for %d steps of %s\n", peer.c_str(), request.steps,
                 request.job.empty() ? "the job polling" : ("job " + request.job).c_str());
    serve_capture(fd, request);
}

void AgentServer::serve_capture(int fd, const AgentRequest& request) {
    const std::string key = request.job.empty() ? std::string("(the only job)") : request.job;
    {
        std::lock_guard lock(m_mutex);
        if (!m_busy_jobs.insert(key).second) return send_error(fd, "a capture of " + key + " is already running");
    }
    NodeCaptureRequest node{request.job, request.steps, request.roundup, request.timeout_s};
    // A rank's state travels in the progress frame of its line ({"progress", "rank": {...}}): older clients read
    // the line alone.
    nlohmann::json rank_state;
    node.on_rank = [&](const RankProgress& r) { rank_state = rank_progress_json(r); };
    NodeCaptureResult result;
    {
        const CaptureWatch watch(fd, m_stopping, node);
        result = capture_on_node(m_daemon, node, [&](const std::string& line) {
            nlohmann::json frame{{"progress", line}};
            if (!rank_state.is_null()) frame["rank"] = std::exchange(rank_state, nlohmann::json());
            write_frame(fd, frame.dump(), kSendTimeoutMs);
        });
    }
    if (!result.ok)
        std::fprintf(m_log, "agent: the capture of %s ended without files: %s\n", key.c_str(), result.error.c_str());
    {
        std::lock_guard lock(m_mutex);
        m_busy_jobs.erase(key);
    }
    if (!result.ok) return send_error(fd, result.error);
    nlohmann::json files = nlohmann::json::array();
    for (const CapturedTrace& r : result.ranks)
        files.push_back({{"rank", r.rank},
                         {"world_size", r.world_size},
                         {"local_rank", r.local_rank},
                         {"pid", r.pid},
                         {"host", r.host},
                         {"bytes", r.raw_bytes.size()}});
    if (!write_frame(fd, nlohmann::json{{"ok", true}, {"job", result.job_id}, {"files", files}}.dump(), kSendTimeoutMs))
        return;
    for (const CapturedTrace& r : result.ranks)
        if (!write_frame(fd, r.raw_bytes, 600000)) return;
    std::fprintf(m_log, "agent: sent %zu rank file(s) of job %s\n", result.ranks.size(), result.job_id.c_str());
}

}  // namespace us::app
