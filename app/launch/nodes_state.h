// The emulated nodes that `ultrascope nodes up` leaves standing (docs/nodes.md, "Nodes that stay up"): a holder
// process owns them and writes what the other commands need to reach them (names, addresses, agent ports, the
// agents' token) to a state file in a run folder only root reads (/run/ultrascope, or ULTRASCOPE_NODES_DIR). The
// holder holds an exclusive lock on the folder's `nodes.lock` for its whole life: the lock, not the file, says
// whether the nodes are up, so a holder that died (SIGKILL, the OOM killer) is told from a live one at once.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "app/launch/process_tree.h"

namespace us::app {

struct StandingNode {
    std::string name;       // the namespace and the hostname commands see on it
    std::string address;    // on the bridge
    std::string interface;  // the node's end of its veth pair (GLOO_SOCKET_IFNAME)
    int agent_port = 0;     // its `ultrascope agent`, on address:agent_port
};

struct NodesState {
    ProcessId holder;
    std::string token;  // every node's agent's
    std::string bridge_address, subnet, folder, description;
    double inter_node_gbps = 0;
    std::vector<StandingNode> nodes;

    std::vector<std::string> agents() const;  // "ADDRESS:PORT" of each node's agent, in node order
    std::string addresses() const;            // "A0,A1,..."
};

std::string nodes_run_dir();     // ULTRASCOPE_NODES_DIR, else /run/ultrascope
std::string nodes_state_path();  // nodes_run_dir()/nodes.json
std::string nodes_lock_path();   // nodes_run_dir()/nodes.lock

void write_nodes_state(const NodesState& state);  // through a temporary file, readable by this user only
std::optional<NodesState> read_nodes_state();     // nullopt when there is no file; UserError when it is damaged

// Whether a holder holds the lock now (the nodes are up).
bool nodes_holder_running();

// The nodes up now; UserError saying to run `ultrascope nodes up N` when none are (and, when a holder died, that
// what it left was removed).
NodesState standing_nodes();

// The state file, the holder's logs and lock, and the run folder when nothing else is in it.
void remove_nodes_run_files();

// When the state file's holder no longer runs: removes what it left (its nodes' processes, namespaces, links and
// folder: stale_runs.h) and the run files; a line per thing removed. None when nothing was stale.
std::vector<std::string> remove_dead_holder_leftovers();

}  // namespace us::app
