// `ultrascope nodes up N [--inter-node-gbps G]`, `nodes exec K -- CMD...`, `nodes down`, `nodes [status]`: emulated
// nodes that stay up between commands, for any job (a torchrun per node) and `ultrascope capture --nodes`
// (docs/nodes.md, "Nodes that stay up"; docs/attach-pytorch.md). This file parses and prints; the holder, the state
// file and exec are app/launch/nodes_holder.h, nodes_state.h and node_exec.h.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "app/cli/capture_commands.h"
#include "app/cli/parse_flags.h"
#include "app/launch/node_exec.h"
#include "app/launch/nodes_holder.h"
#include "app/launch/nodes_state.h"
#include "common/core/check.h"

namespace us::app {
namespace {

const char* const kUsage =
    "usage: ultrascope nodes up N [--inter-node-gbps G] [--inter-node-latency-us L]   make N nodes that stay up\n"
    "       ultrascope nodes exec K -- CMD [ARGS...]   run CMD on node K (its network, its hostname)\n"
    "       ultrascope nodes down                      end what runs on them, remove them\n"
    "       ultrascope nodes [status]                  the nodes up, their addresses and agents\n";

void print_nodes(const NodesState& s, std::FILE* out) {
    std::fprintf(out, "%s\n", s.description.c_str());
    for (size_t k = 0; k < s.nodes.size(); ++k)
        std::fprintf(out, "  node %zu  %-12s %-14s agent %s:%d\n", k, s.nodes[k].name.c_str(),
                     s.nodes[k].address.c_str(), s.nodes[k].address.c_str(), s.nodes[k].agent_port);
    std::fprintf(out,
                 "holder pid %d (state: %s)\n"
                 "run on a node:  ultrascope nodes exec K -- CMD   (MASTER_ADDR=%s, ULTRASCOPE_NODE_ADDRESSES=%s)\n"
                 "capture:        ultrascope capture --nodes --steps N --out DIR\n"
                 "take down:      ultrascope nodes down\n",
                 s.holder.pid, nodes_state_path().c_str(), s.nodes.front().address.c_str(), s.addresses().c_str());
}

int nodes_up(int argc, char** argv) {
    CLI::App cli{"ultrascope nodes up N: emulated nodes that stay up until `ultrascope nodes down` (needs root)"};
    NodeLinks links;
    cli.add_option("count", links.count, "How many nodes (2 to 64)")->required();
    cli.add_option("--inter-node-gbps", links.inter_node_gbps, "Shape the links between nodes to G Gbit/s (tbf)");
    cli.add_option("--inter-node-latency-us", links.inter_node_latency_us,
                   "One-way latency between nodes in microseconds (netem, where the kernel has it)");
    US_PARSE_FLAGS(cli, argc, argv, "nodes up");
    char program[4096] = {};
    US_CHECK_INPUT(::readlink("/proc/self/exe", program, sizeof program - 1) > 0, "cannot read /proc/self/exe");
    const NodesStarted started = start_standing_nodes(links, program);
    for (const std::string& note : started.notes) std::fprintf(stderr, "ultrascope nodes: %s\n", note.c_str());
    print_nodes(started.state, stdout);
    return 0;
}

int nodes_status() {
    for (const std::string& line : remove_dead_holder_leftovers())
        std::fprintf(stderr, "ultrascope nodes: %s\n", line.c_str());
    const std::optional<NodesState> state = nodes_holder_running() ? read_nodes_state() : std::nullopt;
    if (!state) {
        std::printf("no emulated nodes are up (start them: sudo ultrascope nodes up N)\n");
        return 0;
    }
    print_nodes(*state, stdout);
    return 0;
}

int nodes_exec(int argc, char** argv) {  // argv[0] is "exec"
    US_CHECK_INPUT(argc >= 2, "nodes exec needs a node and a command: ultrascope nodes exec K -- CMD [ARGS...]");
    const std::string k = argv[1];
    US_CHECK_INPUT(!k.empty() && k.find_first_not_of("0123456789") == std::string::npos && k.size() < 6,
                   "nodes exec: the node is a number from 0 (got '{}'): ultrascope nodes exec K -- CMD [ARGS...]", k);
    int first = 2;
    if (first < argc && std::strcmp(argv[first], "--") == 0) ++first;
    const std::vector<std::string> command(argv + first, argv + argc);
    US_CHECK_INPUT(!command.empty(), "nodes exec needs a command: ultrascope nodes exec K -- CMD [ARGS...]");
    const NodesState state = standing_nodes();
    return exec_on_node(state, std::stoi(k), command);
}

}  // namespace

int nodes_command(int argc, char** argv) {  // argv[0] is "nodes"
    const std::string sub = argc >= 2 ? argv[1] : "status";
    if (sub == "-h" || sub == "--help" || sub == "help") {
        std::fputs(kUsage, stdout);
        return 0;
    }
    if (sub == "up") return nodes_up(argc - 1, argv + 1);
    if (sub == "exec") return nodes_exec(argc - 1, argv + 1);
    if (sub == "status") return nodes_status();
    if (sub == "down") {
        US_CHECK_INPUT(argc == 2, "nodes down takes no arguments");
        for (const std::string& line : stop_standing_nodes()) std::printf("%s\n", line.c_str());
        return 0;
    }
    fail_user("unknown `nodes` command '{}'\n{}", sub, kUsage);
}

}  // namespace us::app
