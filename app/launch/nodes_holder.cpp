// The holder of the standing emulated nodes, and `nodes up` / `down` around it (nodes_holder.h).
#include "app/launch/nodes_holder.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/launch/launch_options.h"
#include "app/launch/node_namespace.h"
#include "app/launch/stale_runs.h"
#include "app/launch/system_tool.h"
#include "common/core/check.h"
#include "profiler/transport/protocol.h"

namespace us::app {

namespace fs = std::filesystem;

namespace {

constexpr int kAgentPort = 7321;  // the agent's default port: each node has a network of its own

volatile sig_atomic_t g_stop = 0;
void on_stop(int) { g_stop = 1; }

std::string file_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// The holder's stdio on its log, every other inherited descriptor closed (a caller's pipe would otherwise stay
// open for as long as the nodes stand, and a shell reading it would never see its end).
void detach(const std::string& log, int keep_a, int keep_b) {
    const int null = ::open("/dev/null", O_RDONLY);
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(null, 0), ::dup2(out, 1), ::dup2(out, 2);
    std::vector<int> open_fds;
    if (DIR* d = ::opendir("/proc/self/fd")) {
        while (const dirent* e = ::readdir(d)) open_fds.push_back(std::atoi(e->d_name));
        ::closedir(d);
    }
    for (const int fd : open_fds)
        if (fd > 2 && fd != keep_a && fd != keep_b) ::close(fd);  // the directory's own is closed already
}

// Each node's `ultrascope agent`, ended (SIGTERM, then SIGKILL) when this goes.
struct Agents {
    std::vector<pid_t> pids;  // -1: exited, reaped
    ~Agents() { stop(); }
    void stop() {
        std::vector<ProcessId> running;
        for (const pid_t pid : pids)
            if (pid > 0) running.push_back({pid, process_start_ticks(pid)});
        end_processes(running, 5);
        for (const pid_t pid : pids)
            if (pid > 0) ::waitpid(pid, nullptr, 0);
        pids.clear();
    }
};

pid_t start_agent(const std::string& program, const StandingNode& node, const std::string& token,
                  const std::string& log) {
    const std::vector<std::string> argv = {program,   "agent",  "--listen",
                                           "0.0.0.0", "--port", std::to_string(node.agent_port)};
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const pid_t pid = ::fork();
    US_CHECK_INPUT(pid >= 0, "fork: {}", std::strerror(errno));
    if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // a holder killed outright takes its agents with it
        const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ::dup2(out, 1), ::dup2(out, 2);
        if (const std::string error = enter_node(node.name); !error.empty()) {
            std::fprintf(stderr, "%s\n", error.c_str());
            ::_exit(126);
        }
        ::setenv("ULTRASCOPE_AGENT_TOKEN", token.c_str(), 1);  // not on its command line, which anyone reads
        ::execv(args[0], args.data());
        std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
        ::_exit(127);
    }
    return pid;
}

// Until the agent says it serves (it prints once its ports are bound), or it exits: then its log is the error.
void wait_for_agent(pid_t pid, const StandingNode& node, const std::string& log) {
    for (int i = 0; i < 300; ++i) {
        if (file_text(log).find("requests on") != std::string::npos) return;
        if (::waitpid(pid, nullptr, WNOHANG) == pid)
            fail_user("the agent on node {} exited at start: {}", node.name, file_text(log));
        ::usleep(100000);
    }
    fail_user("the agent on node {} did not start within 30 s: {}", node.name, file_text(log));
}

// Until a stop signal; an agent that exits meanwhile is said in the log.
void wait_for_stop(Agents& agents) {
    while (!g_stop) {
        for (size_t i = 0; i < agents.pids.size(); ++i)
            if (agents.pids[i] > 0 && ::waitpid(agents.pids[i], nullptr, WNOHANG) == agents.pids[i]) {
                std::printf(
                    "the agent on node %zu (pid %d) exited: captures on that node fail until `nodes "
                    "down` and `nodes up`\n",
                    i, agents.pids[i]);
                std::fflush(stdout);
                agents.pids[i] = -1;
            }
        ::usleep(200000);
    }
}

// The holder's life: make the nodes and agents, say so on `ready`, wait for a stop signal, take it all down.
int hold(const NodeLinks& links, const std::string& program, int ready) {
    struct sigaction sa {};
    sa.sa_handler = on_stop;
    for (const int sig : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(sig, &sa, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
    auto say = [&ready](const std::string& text) {
        if (ready < 0) return;
        [[maybe_unused]] const ssize_t n = ::write(ready, text.data(), text.size());
        ::close(ready);
        ready = -1;
    };
    try {
        EmulatedNodes nodes(links, links.count);
        NodesState state;
        state.holder = this_process();
        state.token = prof::random_token();
        state.bridge_address = nodes.bridge_address(), state.subnet = nodes.subnet();
        state.inter_node_gbps = links.inter_node_gbps;
        state.description =
            fmt::format("{} emulated nodes up ({}), inter-node links {} over {} (bridge {})", nodes.names().size(),
                        joined(nodes.names()),
                        links.inter_node_gbps > 0 ? fmt::format("{:g} Gbit/s", links.inter_node_gbps) : "unshaped",
                        nodes.subnet(), nodes.bridge_address());
        state.folder = nodes_run_dir();
        for (size_t i = 0; i < nodes.names().size(); ++i)
            state.nodes.push_back({nodes.names()[i], nodes.addresses()[i], nodes.interface(i), kAgentPort});
        Agents agents;  // after the nodes: ended before they go
        for (size_t i = 0; i < state.nodes.size(); ++i) {
            const std::string log = fmt::format("{}/agent-{}.log", nodes_run_dir(), i);
            agents.pids.push_back(start_agent(program, state.nodes[i], state.token, log));
            wait_for_agent(agents.pids.back(), state.nodes[i], log);
        }
        write_nodes_state(state);
        std::string notes;
        for (const std::string& line : nodes.cleaned()) notes += line + "\n";
        say("ok\n" + notes);
        std::printf("holding %s\n", state.description.c_str());
        std::fflush(stdout);
        wait_for_stop(agents);
        std::printf("stopping: ending what runs on the nodes, then removing them\n");
        std::fflush(stdout);
        agents.stop();  // the state file stays until the nodes are gone: a second `down` waits too
        for (const StandingNode& n : state.nodes)
            if (const int left = end_processes(node_processes(n.name), 5); left > 0)
                std::printf("node %s: %d process(es) did not end on SIGTERM within 5 s: killed\n", n.name.c_str(),
                            left);
        return 0;  // the nodes go with `nodes`
    } catch (const std::exception& e) {
        std::error_code ec;
        fs::remove(nodes_state_path(), ec);
        std::printf("failed: %s\n", e.what());
        say(std::string("error\n") + e.what());
        return 1;
    }
}

// Reads what the holder says on the pipe until it closes it (or `limit_s` passes: "").
std::string read_all(int fd, double limit_s) {
    std::string text;
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
    for (char buf[4096];;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
        pollfd p = {fd, POLLIN, 0};
        const int n_ready = left.count() > 0 ? ::poll(&p, 1, int(left.count())) : 0;
        if (n_ready < 0 && errno == EINTR) continue;
        if (n_ready <= 0) return "";
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return text;
        text.append(buf, size_t(n));
    }
}

}  // namespace

NodesStarted start_standing_nodes(const NodeLinks& links, const std::string& program) {
    US_CHECK_INPUT(::geteuid() == 0,
                   "`ultrascope nodes up` needs root (CAP_NET_ADMIN) to make network namespaces and links that stay "
                   "after it returns: run it with sudo (`ultrascope run --nodes` needs no root where user namespaces "
                   "are allowed, but its nodes live only as long as its run)");
    validate_node_links(links, links.count);
    std::error_code ec;
    fs::create_directories(nodes_run_dir(), ec);
    US_CHECK_INPUT(!ec, "cannot make {}: {}", nodes_run_dir(), ec.message());
    ::chmod(nodes_run_dir().c_str(), 0700);  // the state file holds the agents' token
    NodesStarted started;
    started.notes = remove_dead_holder_leftovers();
    const int lock = ::open(nodes_lock_path().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    US_CHECK_INPUT(lock >= 0, "cannot open {}: {}", nodes_lock_path(), std::strerror(errno));
    if (::flock(lock, LOCK_EX | LOCK_NB) != 0) {
        ::close(lock);
        const std::optional<NodesState> up = read_nodes_state();
        fail_user(
            "emulated nodes are already up ({} node(s), holder pid {}): use them (`ultrascope nodes status`), or "
            "take them down first with `sudo ultrascope nodes down`",
            up ? up->nodes.size() : 0, up ? up->holder.pid : 0);
    }
    int ready[2];
    US_CHECK_INPUT(::pipe2(ready, O_CLOEXEC) == 0, "pipe: {}", std::strerror(errno));
    const pid_t holder = ::fork();
    US_CHECK_INPUT(holder >= 0, "fork: {}", std::strerror(errno));
    if (holder == 0) {
        ::close(ready[0]);
        ::setsid();  // out of the caller's session: its terminal's Ctrl-C and hang-up are not the nodes'
        [[maybe_unused]] const int cd = ::chdir("/");
        detach(nodes_run_dir() + "/nodes.log", lock, ready[1]);
        const int code = hold(links, program, ready[1]);
        remove_nodes_run_files();  // the nodes are gone: nothing of them stays, the lock last (`down` waits on it)
        ::_exit(code);
    }
    ::close(ready[1]);
    ::close(lock);  // the holder keeps the lock: the same open file
    const std::string said = read_all(ready[0], 300);
    ::close(ready[0]);
    if (said.rfind("ok\n", 0) == 0) {
        std::istringstream lines(said.substr(3));
        for (std::string line; std::getline(lines, line);)
            if (!line.empty()) started.notes.push_back(line);
        const std::optional<NodesState> state = read_nodes_state();
        US_CHECK_INPUT(state.has_value(), "the nodes' holder said it was up but wrote no {}", nodes_state_path());
        started.state = *state;
        return started;
    }
    if (said.empty()) ::kill(holder, SIGTERM);  // silent for 5 minutes: it takes down what it made
    ::waitpid(holder, nullptr, 0);
    fail_user("emulated nodes: {}",
              said.empty() ? "the set-up did not finish within 5 minutes (its log: " + nodes_run_dir() + "/nodes.log)"
                           : said.substr(said.find('\n') + 1));
}

std::vector<std::string> stop_standing_nodes(double limit_s) {
    if (std::vector<std::string> cleaned = remove_dead_holder_leftovers(); !cleaned.empty()) return cleaned;
    US_CHECK_INPUT(nodes_holder_running(), "no emulated nodes are up: nothing to take down");
    US_CHECK_INPUT(::geteuid() == 0, "`ultrascope nodes down` needs root, as `nodes up` did: run it with sudo");
    const std::optional<NodesState> state = read_nodes_state();
    US_CHECK_INPUT(state.has_value(), "emulated nodes are being set up or taken down: wait for that to finish");
    std::vector<std::string> lines;
    if (still_running(state->holder)) ::kill(state->holder.pid, SIGTERM);
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
    // the lock goes (its file removed) just before the holder exits: wait for both
    while ((nodes_holder_running() || still_running(state->holder)) && std::chrono::steady_clock::now() < end)
        ::usleep(50000);
    if (nodes_holder_running()) {
        kill_processes({state->holder});
        while (nodes_holder_running()) ::usleep(100000);
        lines.push_back(
            fmt::format("the holder (pid {}) did not finish within {:g} s: killed", state->holder.pid, limit_s));
        for (std::string& line : remove_dead_holder_leftovers()) lines.push_back(std::move(line));
    }
    std::string names;
    for (const StandingNode& n : state->nodes) names += (names.empty() ? "" : " ") + n.name;
    lines.push_back(fmt::format("took down {} emulated node(s): {}", state->nodes.size(), names));
    return lines;
}

}  // namespace us::app
