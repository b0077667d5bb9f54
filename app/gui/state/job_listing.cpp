// The jobs the Attach window lists (job_listing.h).
#include "app/gui/state/job_listing.h"

#include <fmt/core.h>

#include "app/capture/agent_client.h"
#include "app/capture/agent_discovery.h"
#include "app/capture/agent_protocol.h"
#include "app/capture/capture_job.h"
#include "app/capture/node_capture.h"

namespace us::gui {

std::vector<ListedJob> listed_jobs(const nlohmann::json& jobs, const std::string& node, const std::string& host) {
    std::vector<ListedJob> out;
    if (!jobs.is_array()) return out;
    for (const nlohmann::json& j : jobs) {
        ListedJob job{node, j.value("id", std::string()), j.value("describe", std::string()), {}};
        if (j.contains("ranks") && j["ranks"].is_array())
            for (const nlohmann::json& r : j["ranks"])
                job.ranks.push_back({r.value("rank", -1), r.value("pid", 0), host, r.value("alive", true)});
        out.push_back(std::move(job));
    }
    return out;
}

void JobListing::start(const std::string& agents, const std::string& token) {
    close();
    m_started = true;
    m_started_at = prof::steady_seconds();
    m_error.clear();
    m_jobs.clear();
    m_target = {};
    m_target.token = token;
    for (size_t start = 0; start < agents.size();) {
        size_t comma = agents.find(',', start);
        if (comma == std::string::npos) comma = agents.size();
        std::string a = agents.substr(start, comma - start);
        a.erase(0, a.find_first_not_of(' '));
        a.erase(a.find_last_not_of(' ') + 1);
        if (!a.empty()) m_target.agents.push_back(a);
        start = comma + 1;
    }
    if (!m_target.agents.empty()) {
        m_where = "agents " + agents;
        return ask_agents();
    }
    const std::string dir = prof::ipc_socket_dir_from_env();
    try {
        m_daemon = std::make_unique<prof::OnDemandDaemon>(dir);
        m_daemon->start();
        m_where = "this node (" + m_daemon->description() + ")";
    } catch (const prof::IpcNameTaken& e) {
        // An agent here owns the name: ask it, as `ultrascope capture` does.
        const std::optional<app::LocalAgent> agent = app::find_local_agent(dir);
        if (!agent) {
            m_error = e.what();
            return;
        }
        m_target.agents = {fmt::format("{}:{}", agent->host, agent->port)};
        m_target.token = agent->token;
        m_where = fmt::format("the agent on this node (pid {}, {}:{})", agent->pid, agent->host, agent->port);
        ask_agents();
    } catch (const std::exception& e) {
        m_error = e.what();
    }
}

void JobListing::ask_agents() {
    if (m_asking) return;
    if (m_thread.joinable()) m_thread.join();
    m_asking = true;
    m_thread = std::thread([this, target = m_target] {
        std::vector<ListedJob> jobs;
        std::string error;
        try {
            for (const app::AgentAddress& a : app::capture_agents(target)) {
                const nlohmann::json answer = app::agent_jobs(a);
                for (ListedJob& j : listed_jobs(answer["jobs"], a.name(), answer.value("host", std::string("?"))))
                    jobs.push_back(std::move(j));
            }
        } catch (const std::exception& e) {
            error = e.what();
        }
        std::lock_guard lock(m_mutex);
        m_answer = std::move(jobs);
        m_answer_error = std::move(error);
        m_answered = true;
        m_asking = false;
    });
}

void JobListing::refresh() {
    if (!m_target.agents.empty()) ask_agents();
}

void JobListing::poll() {
    if (m_daemon) {
        m_jobs = listed_jobs(app::jobs_json(m_daemon->jobs()), "this node", app::this_host_name());
        return;
    }
    std::lock_guard lock(m_mutex);
    if (!m_answered) return;
    m_answered = false;
    m_jobs = std::move(m_answer);
    m_error = std::move(m_answer_error);
}

void JobListing::close() {
    if (m_thread.joinable()) m_thread.join();  // an agent answers (or is given up on) within its timeouts
    m_daemon.reset();
    m_started = false;
    m_jobs.clear();
    m_answered = false;
}

double JobListing::listening_s() const { return m_started ? prof::steady_seconds() - m_started_at : 0; }

}  // namespace us::gui
