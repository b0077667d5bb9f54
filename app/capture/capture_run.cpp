// The capture across nodes (capture_run.h): one node's part each (the daemon here, or an agent per node), then the
// ranks together into one folder.
#include "app/capture/capture_run.h"

#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "app/capture/agent_client.h"
#include "app/capture/agent_discovery.h"
#include "app/capture/capture_output.h"
#include "common/core/check.h"
#include "profiler/transport/socket.h"

namespace us::app {
namespace {

std::string token_for(const CaptureOptions& o) {
    if (!o.token.empty()) return o.token;
    const char* env = std::getenv("ULTRASCOPE_AGENT_TOKEN");
    return env ? std::string(env) : std::string();
}

std::vector<AgentAddress> agents_of(const CaptureOptions& o) {
    std::vector<AgentAddress> out;
    for (const std::string& a : o.agents) {
        const prof::Endpoint e = prof::parse_endpoint(a);
        out.push_back({e.host, e.port, token_for(o)});
    }
    const std::optional<LocalAgent> local = find_local_agent(prof::ipc_socket_dir_from_env());
    for (AgentAddress& a : out) {  // the agent on this node: its token is in the discovery file
        if (a.token.empty() && local && a.port == local->port) a.token = local->token;
        US_CHECK_INPUT(!a.token.empty(),
                       "no token for the agent at {}: give the one it printed with --token or "
                       "ULTRASCOPE_AGENT_TOKEN",
                       a.name());
    }
    return out;
}

// This node without an agent given: own the endpoint, or use the agent that owns it.
NodeCaptureResult capture_here(const NodeCaptureRequest& request, std::FILE* log) {
    const std::string dir = prof::ipc_socket_dir_from_env();
    const CaptureProgress progress = [log](const std::string& line) {
        std::fprintf(log, "capture: %s\n", line.c_str());
    };
    try {
        prof::OnDemandDaemon daemon(dir);
        daemon.start();
        std::fprintf(log, "capture: serving Kineto's daemon protocol on %s\n", daemon.description().c_str());
        return capture_on_node(daemon, request, progress);
    } catch (const prof::IpcNameTaken&) {
        const std::optional<LocalAgent> agent = find_local_agent(dir);
        if (!agent) throw;
        const AgentAddress address{agent->host, agent->port, agent->token};
        std::fprintf(log, "capture: the agent on this node (pid %d, %s) owns the daemon name: asking it\n", agent->pid,
                     address.name().c_str());
        return agent_capture(address, request, progress);
    }
}

std::vector<NodeCaptureResult> capture_on_agents(const std::vector<AgentAddress>& agents,
                                                 const NodeCaptureRequest& request, std::FILE* log) {
    std::vector<NodeCaptureResult> results(agents.size());
    std::vector<std::thread> threads;
    std::mutex log_mutex;
    for (size_t i = 0; i < agents.size(); ++i)
        threads.emplace_back([&, i] {
            results[i] = agent_capture(agents[i], request, [&](const std::string& line) {
                std::lock_guard lock(log_mutex);
                std::fprintf(log, "capture: [%s] %s\n", agents[i].name().c_str(), line.c_str());
            });
        });
    for (std::thread& t : threads) t.join();
    return results;
}

// Ranks without RANK in their environment (one process, no launcher) are numbered in order.
void number_ranks(std::vector<CapturedTrace>& ranks) {
    std::sort(ranks.begin(), ranks.end(), [](const CapturedTrace& a, const CapturedTrace& b) {
        return a.rank != b.rank ? a.rank < b.rank : a.pid < b.pid;
    });
    const bool numbered = std::all_of(ranks.begin(), ranks.end(), [](const CapturedTrace& r) { return r.rank >= 0; });
    for (size_t i = 0; i < ranks.size() && !numbered; ++i) {
        ranks[i].rank = int(i);
        ranks[i].world_size = int(ranks.size());
    }
}

void list_jobs(const CaptureOptions& o, std::FILE* out) {
    US_CHECK_INPUT(!o.agents.empty(),
                   "--list asks agents for their jobs: give --agents HOST:PORT,... (or start "
                   "`ultrascope agent` here and name it)");
    for (const AgentAddress& a : agents_of(o)) {
        const nlohmann::json answer = agent_jobs(a);
        std::fprintf(out, "%s (%s):\n", a.name().c_str(), answer.value("host", std::string("?")).c_str());
        if (answer["jobs"].empty()) std::fprintf(out, "  no PyTorch job polls this node\n");
        for (const nlohmann::json& j : answer["jobs"])
            std::fprintf(out, "  %s\n", j.value("describe", std::string()).c_str());
    }
}

constexpr int kSameStepRetries = 2;

// One capture of every rank into DIR: the traces gathered from this node or the agents, written as rank files.
CaptureWritten capture_once(const CaptureOptions& o, int roundup, std::FILE* log, std::string& job_id) {
    const NodeCaptureRequest request{o.job, o.steps, roundup, o.timeout_s};
    std::vector<NodeCaptureResult> results;
    std::vector<std::string> names;
    if (o.agents.empty()) {
        results.push_back(capture_here(request, log));
        names.push_back("this node");
    } else {
        const std::vector<AgentAddress> agents = agents_of(o);
        results = capture_on_agents(agents, request, log);
        for (const AgentAddress& a : agents) names.push_back(a.name());
    }
    std::string failures;
    std::vector<CapturedTrace> ranks;
    for (size_t i = 0; i < results.size(); ++i) {
        if (!results[i].ok) failures += (results.size() > 1 ? "\n" + names[i] + ": " : "") + results[i].error;
        for (CapturedTrace& r : results[i].ranks) ranks.push_back(std::move(r));
    }
    US_CHECK_INPUT(failures.empty(), "capture failed, nothing written to {}: {}", o.out, failures);
    number_ranks(ranks);
    job_id = results.front().job_id;
    return write_capture(ranks, o.out);
}

}  // namespace

int run_capture(const CaptureOptions& o, std::FILE* out, std::FILE* log) {
    if (o.list) {
        list_jobs(o, out);
        return 0;
    }
    US_CHECK_INPUT(!o.out.empty(), "capture needs --out DIR: the folder the rank files go to");
    check_capture_folder(o.out);
    // Ranks are asked a poll apart and each starts at the next multiple of the roundup: when a poll interval spans
    // more steps than that, ranks start on different multiples. The traces' clocks tell (finish_capture); then the
    // capture is taken again with a roundup four times larger, at most twice.
    std::string job_id;
    int roundup = o.roundup;
    CaptureWritten written = capture_once(o, roundup, log, job_id);
    for (int retry = 0; !written.same_steps && retry < kSameStepRetries; ++retry) {
        std::fprintf(log,
                     "capture: the ranks captured different steps (--roundup %d is fewer than the steps one poll "
                     "interval spans):\n%s\ncapture: again with --roundup %d\n",
                     roundup, written.message.c_str(), roundup * 4);
        std::error_code ec;
        std::filesystem::remove_all(o.out, ec);  // written by this capture a moment ago
        roundup *= 4;
        written = capture_once(o, roundup, log, job_id);
    }
    std::fprintf(out, "captured %d step%s of job %s on %zu rank%s:\n", written.steps, written.steps == 1 ? "" : "s",
                 job_id.c_str(), written.rank_files.size(), written.rank_files.size() == 1 ? "" : "s");
    for (const std::string& f : written.rank_files) std::fprintf(out, "  %s\n", f.c_str());
    if (!written.message.empty()) std::fprintf(out, "%s\n", written.message.c_str());
    if (!written.same_steps) {
        std::fprintf(out,
                     "the ranks did not capture the same steps, even with --roundup %d: the files are kept as "
                     "captured; capture again with a larger --roundup (more than the steps the job makes in one poll "
                     "interval)\n",
                     roundup);
        return 3;  // written, but not a consistent capture
    }
    std::fprintf(out, "open it: ultrascope %s    or: ultrascope report %s\n", o.out.c_str(), o.out.c_str());
    return 0;
}

}  // namespace us::app
