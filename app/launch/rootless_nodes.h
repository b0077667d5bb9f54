// Emulated nodes without root (docs/nodes.md, "Without root"): where the kernel lets an unprivileged user make a user
// namespace, `ultrascope run --nodes` and `ultrascope calibrate --nodes` move themselves into a new user, network and
// mount namespace, this user mapped to root there. In it they hold CAP_NET_ADMIN over a network of their own, so the
// bridge, veth pairs, qdiscs and node namespaces of EmulatedNodes can be made as root would make them, and all of
// it goes with the run's last process. The run's network is its own: nothing outside (a GUI elsewhere) reaches it.
#pragma once

#include <string>
#include <vector>

namespace us::app {

// Called by a non-root process before it makes emulated nodes, while it has one thread (a user namespace cannot be
// entered by a process with several): enters the namespaces, gives them a private /run (where `ip netns` keeps the
// nodes' names) and brings the loopback up. UserError saying what to do where the system does not allow it. Returns
// lines to show on what killed runs left (stale_runs.h): the processes of killed launches it ended (from here: inside
// the namespace their marks cannot be read), and the nodes a killed run as root left in this machine's network, which
// it cannot remove; a killed run's folder is removed when the nodes are made.
std::vector<std::string> enter_rootless_namespace();

}  // namespace us::app
