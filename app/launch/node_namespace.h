// Entering a standing emulated node from a process of this machine (nodes_state.h): its network namespace (by the
// name `ip netns` gave it, /run/netns/NAME) and a UTS namespace of the process's own with the node's name as its
// hostname, as Open MPI's agent script does for `ultrascope run --nodes`. Used by the nodes' holder for each
// node's agent and by `ultrascope nodes exec`, both in a forked child before it execs.
#pragma once

#include <string>
#include <sys/types.h>
#include <vector>

#include "app/launch/process_tree.h"

namespace us::app {

// Moves the calling process onto the node; "" when done, else what failed (the caller is a forked child: it
// reports and exits).
std::string enter_node(const std::string& node);

// The processes inside the node's network namespace now (`ip netns pids`).
std::vector<ProcessId> node_processes(const std::string& node);

// SIGTERM to each of `processes`, up to `grace_s` for them to end, then SIGKILL to those left; how many were
// still running at the end of the grace.
int end_processes(const std::vector<ProcessId>& processes, double grace_s);

}  // namespace us::app
