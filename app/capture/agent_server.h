// `ultrascope agent`: one per node. It owns the node's Kineto daemon endpoint (it learns the polling processes and
// their jobs on a thread of its own) and answers the CLI or the GUI over TCP: the jobs with their ranks, and a
// capture of N steps of one job, whose files it streams back. Every request carries the agent's token (the live
// listener's scheme: 32 hex characters from /dev/urandom); one without it is refused and logged.
#pragma once

#include <atomic>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>

#include "app/capture/agent_protocol.h"
#include "profiler/ondemand/ondemand_daemon.h"
#include "profiler/transport/socket.h"

namespace us::app {

struct AgentOptions {
    std::string listen = "127.0.0.1";
    int port = 7321;         // kAgentDefaultPort; 0: any free port (tests)
    std::string token;       // "" = a new random one
    std::string socket_dir;  // "" = the abstract name (KINETO_IPC_SOCKET_DIR by default)
    std::string record;      // --record FILE: every datagram, for the replay test
};

class AgentServer {
public:
    // Binds the daemon's name and the TCP port now (UserError / IpcNameTaken with what to do).
    explicit AgentServer(const AgentOptions& options, std::FILE* log);
    ~AgentServer();
    int port() const { return m_port; }
    const std::string& token() const { return m_token; }
    const std::string& daemon_description() const { return m_daemon.description(); }
    // Serves until `stop` becomes true; every connection gets a thread; returns once they have all ended (a capture
    // in progress gives up and says the agent is stopping).
    void run(const std::atomic<bool>& stop);

private:
    void handle(prof::Socket connection, const std::string& peer);
    void serve_capture(int fd, const AgentRequest& request);

    AgentOptions m_options;
    std::FILE* m_log;
    prof::OnDemandDaemon m_daemon;
    prof::Socket m_listen;
    int m_port = 0;
    std::string m_token;
    std::mutex m_mutex;
    std::set<std::string> m_busy_jobs;
    std::atomic<bool> m_stopping{false};
    std::atomic<int> m_connections{0};  // threads serving a request (detached: a long-lived agent keeps none)  // one
                                        // capture per job at a time: they would arm the same ranks
};

}  // namespace us::app
