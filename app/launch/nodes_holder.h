// `ultrascope nodes up` and `down` (docs/nodes.md, "Nodes that stay up"). Emulated nodes live as long as the
// EmulatedNodes that made them; to leave them standing after the command returns, `up` forks a detached holder
// (its own session, stdio on nodes_run_dir()/nodes.log) that makes the nodes, starts an `ultrascope agent` on each
// (its node's Kineto endpoint: abstract sockets are per network namespace), writes the state file (nodes_state.h)
// and then waits for SIGTERM. On it, it ends everything still running on the nodes (agents, jobs started with
// `nodes exec`), removes the state file and the nodes, and exits, which releases the lock `down` waits on. A holder
// killed outright leaves names carrying its pid: stale_runs.h removes them at the next `up`, `down`, `status` or
// `run --nodes`.
#pragma once

#include <string>
#include <vector>

#include "app/launch/emulated_nodes.h"
#include "app/launch/nodes_state.h"

namespace us::app {

struct NodesStarted {
    NodesState state;
    std::vector<std::string> notes;  // what was removed of killed runs before the nodes were made
};

// Starts the holder and returns once the nodes and their agents are up; `program` is the ultrascope binary (the
// agents'). UserError (not root, nodes already up, a set-up step that failed) with nothing left made.
NodesStarted start_standing_nodes(const NodeLinks& links, const std::string& program);

// Signals the holder and waits (up to `limit_s`, then kills it and removes what it left); a line per thing done.
// UserError when no nodes are up.
std::vector<std::string> stop_standing_nodes(double limit_s = 60);

}  // namespace us::app
