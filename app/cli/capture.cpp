// `ultrascope capture --steps N --out DIR [--agents HOST:PORT,...|--nodes [N]] [--job ID] [--timeout S]`: N optimizer
// steps of a running PyTorch job (started with KINETO_USE_DAEMON=1) from every rank, as a folder of rank files that
// `ultrascope DIR` and `ultrascope report DIR` open (docs/attach-pytorch.md). This file parses and prints; the
// capture itself is app/capture/capture_run.h.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "app/capture/capture_run.h"
#include "app/cli/capture_commands.h"
#include "app/cli/parse_flags.h"
#include "app/launch/nodes_state.h"
#include "common/core/check.h"

namespace us::app {

int capture_command(int argc, char** argv) {
    CLI::App cli{"ultrascope capture: N optimizer steps of a running PyTorch job (KINETO_USE_DAEMON=1), every rank"};
    CaptureOptions o;
    std::string agents;
    cli.add_option("--steps", o.steps, "Optimizer steps to capture on every rank (default 3)");
    cli.add_option("--out", o.out, "Folder to write the rank files to (new, or empty)");
    cli.add_option("--agents", agents,
                   "HOST:PORT,... of `ultrascope agent`s, one per node (default: this node, no agent needed)");
    std::string nodes;
    CLI::Option* nodes_flag = cli.add_option("--nodes", nodes,
                                             "Capture from the agents of the emulated nodes up (`ultrascope nodes "
                                             "up N`); N, when given, must be how many are up")
                                  ->expected(0, 1);
    cli.add_option("--job", o.job, "The job: its Slurm job id or its launcher's pid (default: the only job polling)");
    cli.add_option("--timeout", o.timeout_s, "Seconds to wait for the ranks and their files (default 120)");
    cli.add_option("--roundup", o.roundup,
                   "Every rank starts at the next multiple of R optimizer steps, so all capture the same steps "
                   "(default 100: more than the steps one poll interval spans)");
    cli.add_option("--token", o.token, "The agents' token (default: ULTRASCOPE_AGENT_TOKEN, or this node's agent's)");
    cli.add_flag("--list", o.list, "Only list the jobs the agents see, with their ranks");
    US_PARSE_FLAGS(cli, argc, argv, "capture");
    US_CHECK_INPUT(o.steps >= 1 && o.steps <= 1000, "--steps must be from 1 to 1000");
    US_CHECK_INPUT(o.roundup >= 1, "--roundup must be positive");
    US_CHECK_INPUT(o.timeout_s > 0, "--timeout must be positive");
    for (size_t start = 0; start < agents.size();) {
        size_t comma = agents.find(',', start);
        if (comma == std::string::npos) comma = agents.size();
        if (comma > start) o.agents.push_back(agents.substr(start, comma - start));
        start = comma + 1;
    }
    if (nodes_flag->count() > 0) {  // the standing nodes' agents, their addresses and token from the state file
        US_CHECK_INPUT(o.agents.empty(), "--nodes and --agents both name the agents: give one of them");
        const NodesState state = standing_nodes();
        US_CHECK_INPUT(nodes.empty() || nodes == std::to_string(state.nodes.size()),
                       "--nodes {}: {} emulated node(s) are up ({}); give --nodes alone, or --nodes {}", nodes,
                       state.nodes.size(), state.addresses(), state.nodes.size());
        o.agents = state.agents();
        if (o.token.empty()) o.token = state.token;
    }
    return run_capture(o, stdout, stderr);
}

}  // namespace us::app
