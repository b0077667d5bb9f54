// `ultrascope agent [--port P] [--listen ADDR] [--token T] [--record FILE]`: this node's Kineto daemon for
// `ultrascope capture --agents` and the GUI (docs/attach-pytorch.md, "Agent protocol"). Runs until interrupted.
#include <CLI/CLI.hpp>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "app/capture/agent_discovery.h"
#include "app/capture/agent_protocol.h"
#include "app/capture/agent_server.h"
#include "app/cli/capture_commands.h"
#include "app/cli/parse_flags.h"

namespace us::app {
namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

}  // namespace

int agent_command(int argc, char** argv) {
    CLI::App cli{"ultrascope agent: this node's Kineto daemon; captures for `ultrascope capture --agents`"};
    AgentOptions o;
    o.port = kAgentDefaultPort;
    if (const char* t = std::getenv("ULTRASCOPE_AGENT_TOKEN")) o.token = t;
    o.socket_dir = prof::ipc_socket_dir_from_env();
    cli.add_option("--port", o.port, "TCP port for the CLI and the GUI (default 7321; 0: any free port, printed)")
        ->check(CLI::Range(0, 65535));
    cli.add_option("--listen", o.listen, "Address to listen on (default 127.0.0.1; 0.0.0.0 for other nodes)");
    cli.add_option("--token", o.token, "The token requests must carry (default: ULTRASCOPE_AGENT_TOKEN, or new)");
    cli.add_option("--record", o.record, "Write every datagram Kineto sends to FILE (JSON lines) for replays");
    US_PARSE_FLAGS(cli, argc, argv, "agent");
    AgentServer server(o, stderr);
    write_agent_discovery(o.socket_dir, {int(::getpid()), server.port(), o.listen, server.token()});
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::printf("ultrascope agent: Kineto daemon on %s, requests on %s:%d\ntoken %s\n",
                server.daemon_description().c_str(), o.listen.c_str(), server.port(), server.token().c_str());
    std::fflush(stdout);
    server.run(g_stop);
    remove_agent_discovery(o.socket_dir);
    std::fprintf(stderr, "ultrascope agent: stopped\n");
    return 0;
}

}  // namespace us::app
