// The PyTorch jobs the Attach window lists: from this node's Kineto endpoint, which the window owns while it is
// open (the jobs poll it; a capture then arms their ranks through it), or, when an `ultrascope agent` owns that
// endpoint here, from that agent; or from the agents the user names (HOST:PORT, with their token), asked on a
// thread of their own so that a slow node never holds up a frame.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/capture/capture_run.h"
#include "profiler/ondemand/ondemand_daemon.h"

namespace us::gui {

struct ListedRank {
    int rank = -1, pid = 0;
    std::string host;
    bool alive = true;
};

struct ListedJob {
    std::string node;  // "this node" or the agent's HOST:PORT
    std::string id;    // what `capture --job` takes
    std::string describe;
    std::vector<ListedRank> ranks;
};

// The jobs of one node's "jobs" answer (agent_protocol.h's jobs_json): what the window draws.
std::vector<ListedJob> listed_jobs(const nlohmann::json& jobs, const std::string& node, const std::string& host);

class JobListing {
public:
    ~JobListing() { close(); }
    // Lists the agents in `agents` (HOST:PORT,...; "" = this node) from now on; the error says why not.
    void start(const std::string& agents, const std::string& token);
    void refresh();  // the agents are asked again (this node's endpoint is read every frame)
    void poll();     // once a frame
    void close();    // the endpoint is released, the agents' thread joined

    bool started() const { return m_started; }
    const std::vector<ListedJob>& jobs() const { return m_jobs; }
    const std::string& error() const { return m_error; }
    const std::string& where() const { return m_where; }  // "this node (@dynolog)", "agents A, B"
    double listening_s() const;                           // since start
    bool asking() const { return m_asking; }              // the agents' answer is awaited
    // What a capture of the jobs listed takes: the agents, their token, this node's endpoint when owned.
    const app::CaptureOptions& capture_target() const { return m_target; }
    prof::OnDemandDaemon* daemon() { return m_daemon.get(); }

private:
    void ask_agents();

    bool m_started = false;
    std::unique_ptr<prof::OnDemandDaemon> m_daemon;
    app::CaptureOptions m_target;
    std::string m_where, m_error;
    std::vector<ListedJob> m_jobs;
    double m_started_at = 0;
    std::thread m_thread;
    std::atomic<bool> m_asking{false};
    std::mutex m_mutex;  // the agents' answer, from m_thread
    std::vector<ListedJob> m_answer;
    std::string m_answer_error;
    bool m_answered = false;
};

}  // namespace us::gui
