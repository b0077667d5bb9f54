// `ultrascope nodes exec K -- CMD...` (docs/nodes.md, "Nodes that stay up"): CMD runs on standing node K (its
// network namespace, its hostname), with what a job spread over the nodes needs to find the others in its
// environment: the nodes' addresses, node 0's as MASTER_ADDR (and torchrun's PET_MASTER_ADDR, PET_NNODES,
// PET_NODE_RANK, which its own flags override), the node's interface for gloo and NCCL. CMD's stdio is this
// process's; its exit code is returned (128 + the signal that ended it). A stop signal to this process (Ctrl-C,
// SIGTERM, SIGHUP) ends CMD's whole process tree: SIGTERM, then SIGKILL to what is left after a grace.
#pragma once

#include <string>
#include <vector>

#include "app/launch/nodes_state.h"

namespace us::app {

// UserError when K is not a node of `state` or CMD is empty.
int exec_on_node(const NodesState& state, int node, const std::vector<std::string>& command);

}  // namespace us::app
