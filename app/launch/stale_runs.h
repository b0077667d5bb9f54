// What a killed run leaves, found and removed by the next one (docs/nodes.md, "Teardown, and what a killed run
// leaves"). A run killed outright (SIGKILL, a test's timeout, the OOM killer) cannot tear down: its emulated nodes'
// namespaces, bridge and folder stay, and where its mpirun was stuck, processes too. Each is marked with its owner (the
// nodes' names and folder with its process id, the folder's `owner` file with its start time and pid namespace, every
// launched process with ULTRASCOPE_LAUNCH_OWNER), so the next run removes exactly what belongs to owners that no longer
// run, and never what a live run beside it uses. Each function returns a line per owner it cleaned up after.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace us::app {

// Ends the processes marked as launched by a program that no longer runs (orphans of a killed launch: a stuck mpirun,
// ranks), in this pid namespace, that this user may signal.
std::vector<std::string> end_orphaned_launches();

// The emulated nodes' folder of this process, for mkdtemp: "/tmp/ultrascope-nodes-us<pid>-XXXXXX".
std::string nodes_folder_template();
// Writes the folder's `owner` file: this process's id, start time and pid namespace.
void record_nodes_owner(const std::string& folder);
// Removes the nodes, bridges and folders of owners that no longer run: the processes still inside a node first, then
// its namespace (with its veth pair and qdiscs), the bridge, the folder. Names need CAP_NET_ADMIN over this network
// (root, or the run's own user namespace, where a killed run's names went with it); folders need only this user.
std::vector<std::string> remove_stale_nodes();
// Seen from a run without root before it moves into namespaces of its own: the nodes a killed run as root left in
// this machine's network, which only root can remove; a line saying so and how, or none.
std::vector<std::string> stale_nodes_needing_root();

// Removes the entries of `dir` named `prefix`<pid>... whose process no longer runs (a killed command's temporary
// files, e.g. "ultrascope-calibrate-").
std::vector<std::string> remove_stale_temporary(const std::filesystem::path& dir, const std::string& prefix);

}  // namespace us::app
