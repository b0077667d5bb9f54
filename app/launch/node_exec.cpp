// Running a command on a standing emulated node (node_exec.h).
#include "app/launch/node_exec.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "app/launch/node_namespace.h"
#include "app/launch/process_tree.h"
#include "common/core/check.h"

namespace us::app {

namespace {

volatile sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

// The environment CMD gets beside this process's.
std::vector<std::pair<std::string, std::string>> node_environment(const NodesState& s, int k) {
    const StandingNode& node = s.nodes[size_t(k)];
    return {{"ULTRASCOPE_NODE", std::to_string(k)},
            {"ULTRASCOPE_NODE_NAME", node.name},
            {"ULTRASCOPE_NODE_ADDRESS", node.address},
            {"ULTRASCOPE_NODE_ADDRESSES", s.addresses()},
            {"ULTRASCOPE_NODES", std::to_string(s.nodes.size())},
            {"MASTER_ADDR", s.nodes.front().address},
            {"PET_MASTER_ADDR", s.nodes.front().address},  // torchrun's --master-addr default
            {"PET_NNODES", std::to_string(s.nodes.size())},
            {"PET_NODE_RANK", std::to_string(k)},
            {"GLOO_SOCKET_IFNAME", node.interface},  // the node's name resolves nowhere: gloo would take loopback
            {"NCCL_SOCKET_IFNAME", node.interface},
            {"TP_SOCKET_IFNAME", node.interface},
            {kLaunchOwnerVariable, owner_tag(this_process())}};  // a later run ends what a killed exec left
}

// Ends CMD's tree: SIGTERM to every process of it, then SIGKILL to what is left after 5 s.
void end_tree(pid_t child) {
    std::vector<ProcessId> tree = process_tree(child);
    for (const ProcessId& p : tree) ::kill(p.pid, SIGTERM);
    for (int i = 0; i < 50; ++i) {
        if (::waitpid(child, nullptr, WNOHANG) == child) break;
        ::usleep(100000);
    }
    for (const ProcessId& p : process_tree(child))  // children it made since
        if (std::find(tree.begin(), tree.end(), p) == tree.end()) tree.push_back(p);
    kill_processes(tree);
}

}  // namespace

int exec_on_node(const NodesState& state, int node, const std::vector<std::string>& command) {
    US_CHECK_INPUT(node >= 0 && size_t(node) < state.nodes.size(),
                   "there is no node {}: {} node(s) are up, numbered 0 to {}", node, state.nodes.size(),
                   state.nodes.size() - 1);
    US_CHECK_INPUT(!command.empty(), "nodes exec needs a command: ultrascope nodes exec K -- CMD [ARGS...]");
    const auto environment = node_environment(state, node);
    std::vector<char*> args;
    for (const std::string& a : command) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    struct sigaction sa {};
    sa.sa_handler = on_signal;  // no SA_RESTART: the wait below wakes
    for (const int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
    const pid_t child = ::fork();
    US_CHECK_INPUT(child >= 0, "fork: {}", std::strerror(errno));
    if (child == 0) {
        for (const int sig : {SIGINT, SIGTERM, SIGHUP}) ::signal(sig, SIG_DFL);
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // this process killed outright: CMD is told to stop
        if (const std::string error = enter_node(state.nodes[size_t(node)].name); !error.empty()) {
            std::fprintf(stderr, "ultrascope nodes exec: %s\n", error.c_str());
            ::_exit(126);
        }
        for (const auto& [name, value] : environment) ::setenv(name.c_str(), value.c_str(), 1);
        ::execvp(args[0], args.data());
        std::fprintf(stderr, "ultrascope nodes exec: %s: %s\n", args[0], std::strerror(errno));
        ::_exit(errno == ENOENT ? 127 : 126);
    }
    int status = 0;
    while (true) {
        const pid_t r = ::waitpid(child, &status, WNOHANG);
        if (r == child) break;
        if (g_signal != 0) {
            std::fprintf(stderr, "ultrascope nodes exec: %s: ending %s on node %d\n", strsignal(g_signal), args[0],
                         node);
            end_tree(child);
            ::waitpid(child, &status, 0);
            return 128 + g_signal;
        }
        ::usleep(20000);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace us::app
