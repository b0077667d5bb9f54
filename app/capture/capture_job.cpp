// The capture across nodes (capture_job.h): one node's part each (the daemon here, or an agent per node), then the
// ranks together into one folder; events, not printing.
#include "app/capture/capture_job.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>

#include "app/capture/agent_discovery.h"
#include "common/core/check.h"
#include "profiler/transport/socket.h"

namespace us::app {
namespace {

using Kind = CaptureEvent::Kind;

std::string token_for(const CaptureOptions& o) {
    if (!o.token.empty()) return o.token;
    const char* env = std::getenv("ULTRASCOPE_AGENT_TOKEN");
    return env ? std::string(env) : std::string();
}

// One node's requests: its lines and rank states go out as events named by the node.
struct NodeEvents {
    const CaptureCallbacks& callbacks;
    std::string node;
    void line(const std::string& text) const {
        if (callbacks.on_event) callbacks.on_event({Kind::line, node, text, {}, 0});
    }
    NodeCaptureRequest request(const NodeCaptureRequest& base) const {
        NodeCaptureRequest r = base;
        if (callbacks.on_event)
            r.on_rank = [this](const RankProgress& rank) { callbacks.on_event({Kind::rank, node, "", rank, 0}); };
        return r;
    }
};

// This node without an agent given: the caller's endpoint, or own it, or use the agent that owns it.
NodeCaptureResult capture_here(const NodeCaptureRequest& base, const CaptureCallbacks& callbacks) {
    const NodeEvents events{callbacks, ""};
    const NodeCaptureRequest request = events.request(base);
    const CaptureProgress progress = [&](const std::string& line) { events.line(line); };
    if (callbacks.daemon) return capture_on_node(*callbacks.daemon, request, progress);
    const std::string dir = prof::ipc_socket_dir_from_env();
    try {
        prof::OnDemandDaemon daemon(dir);
        daemon.start();
        events.line("serving Kineto's daemon protocol on " + daemon.description());
        return capture_on_node(daemon, request, progress);
    } catch (const prof::IpcNameTaken&) {
        const std::optional<LocalAgent> agent = find_local_agent(dir);
        if (!agent) throw;
        const AgentAddress address{agent->host, agent->port, agent->token};
        events.line(fmt::format("the agent on this node (pid {}, {}) owns the daemon name: asking it", agent->pid,
                                address.name()));
        return agent_capture(address, request, progress);
    }
}

std::vector<NodeCaptureResult> capture_on_agents(const std::vector<AgentAddress>& agents,
                                                 const NodeCaptureRequest& request, const CaptureCallbacks& callbacks) {
    std::vector<NodeCaptureResult> results(agents.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < agents.size(); ++i)
        threads.emplace_back([&, i] {
            const NodeEvents events{callbacks, agents[i].name()};
            results[i] =
                agent_capture(agents[i], events.request(request), [&](const std::string& line) { events.line(line); });
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

constexpr int kSameStepRetries = 2;

// One capture of every rank into DIR: the traces gathered from this node or the agents, written as rank files.
CaptureWritten capture_once(const CaptureOptions& o, int roundup, const CaptureCallbacks& callbacks,
                            std::string& job_id) {
    NodeCaptureRequest request{o.job, o.steps, roundup, o.timeout_s};
    request.cancel = callbacks.cancel;
    request.cancelled_why = "cancelled";
    std::vector<NodeCaptureResult> results;
    std::vector<std::string> names;
    if (o.agents.empty()) {
        results.push_back(capture_here(request, callbacks));
        names.push_back("this node");
    } else {
        const std::vector<AgentAddress> agents = capture_agents(o);
        results = capture_on_agents(agents, request, callbacks);
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

std::vector<AgentAddress> capture_agents(const CaptureOptions& o) {
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

CaptureOutcome capture_job_or_throw(const CaptureOptions& o, const CaptureCallbacks& callbacks) {
    US_CHECK_INPUT(!o.out.empty(), "capture needs --out DIR: the folder the rank files go to");
    check_capture_folder(o.out);
    // Ranks are asked a poll apart and each starts at the next multiple of the roundup: when a poll interval spans
    // more steps than that, ranks start on different multiples. The traces' clocks tell (finish_capture); then the
    // capture is taken again with a roundup four times larger, at most twice.
    CaptureOutcome outcome;
    outcome.folder = o.out;
    outcome.roundup = o.roundup;
    outcome.written = capture_once(o, outcome.roundup, callbacks, outcome.job_id);
    for (int retry = 0; !outcome.written.same_steps && retry < kSameStepRetries; ++retry) {
        if (callbacks.on_event) callbacks.on_event({Kind::retried, "", outcome.written.message, {}, outcome.roundup});
        std::error_code ec;
        std::filesystem::remove_all(o.out, ec);  // written by this capture a moment ago
        outcome.roundup *= 4;
        outcome.written = capture_once(o, outcome.roundup, callbacks, outcome.job_id);
    }
    outcome.ok = true;
    return outcome;
}

CaptureOutcome capture_job(const CaptureOptions& o, const CaptureCallbacks& callbacks) noexcept {
    try {
        return capture_job_or_throw(o, callbacks);
    } catch (const std::exception& e) {
        CaptureOutcome failed;
        failed.folder = o.out;
        failed.error = e.what();
        return failed;
    }
}

}  // namespace us::app
