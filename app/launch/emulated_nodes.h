// Nodes emulated on this machine (docs/nodes.md), Mininet-style: each node a network namespace with a hostname of
// its own, joined to a bridge in this namespace by a veth pair; the inter-node links shaped with `tc` (tbf for
// bandwidth; netem for latency where the kernel has it). Open MPI sees separate hosts: its rsh launcher reaches a
// node through an agent script that enters the node's namespace, ranks on one node keep shared memory, and ranks on
// different nodes talk TCP over the shaped links. Everything made here is removed when the object goes, and
// whatever a killed run left (names and a folder carrying an owner that no longer runs) is removed by the next one
// before it makes its own (stale_runs.h).
// Needs CAP_NET_ADMIN (root); UserError with what to do otherwise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace us::app {

struct NodeLinks {
    int count = 2;                     // nodes (0: none, where a NodeLinks says whether to emulate any)
    double inter_node_gbps = 0;        // 0: unshaped
    double inter_node_latency_us = 0;  // 0: none (netem; refused where the kernel lacks it)
    // "block": ranks/nodes consecutive ranks a node (tp, innermost in the grid, stays inside a node); "cyclic": rank
    // r on node r mod N (a tp group spread over the nodes, for the comparison)
    std::string placement = "block";
    bool operator==(const NodeLinks&) const = default;
};

class EmulatedNodes {
public:
    // Creates the nodes; throws UserError (validate_node_links's rules, launch_options.h; no CAP_NET_ADMIN, no `ip` or
    // `tc`, no netem for a latency) with nothing left behind.
    EmulatedNodes(const NodeLinks& links, int ranks);
    ~EmulatedNodes();
    EmulatedNodes(const EmulatedNodes&) = delete;
    EmulatedNodes& operator=(const EmulatedNodes&) = delete;

    const std::vector<std::string>& names() const { return m_nodes; }          // the nodes' hostnames (and namespaces)
    const std::string& hostfile() const { return m_hostfile; }                 // ranks/nodes slots each, in node order
    const std::string& bridge_address() const { return m_bridge_ip; }          // this namespace's address on the bridge
    const std::string& subnet() const { return m_subnet; }                     // "10.77.X.0/24"
    const std::vector<std::string>& addresses() const { return m_addresses; }  // each node's, in node order
    std::string interface(size_t node) const { return m_prefix + "p" + std::to_string(node); }  // its veth end
    // mpirun's arguments to launch onto the nodes (the agent, TCP on the bridge's subnet only), beside hostfile().
    std::vector<std::string> mpirun_args() const;
    std::string describe() const;  // one line: nodes, ranks per node, the links
    // Measured by the links' counters since the nodes were made: the bytes the nodes sent into the bridge, and of
    // them those that reached this namespace (the listener, mpirun) rather than another node. Frames with their
    // headers (Ethernet, IP, TCP).
    struct LinkBytes {
        uint64_t sent_by_nodes = 0, to_this_host = 0;
        uint64_t between_nodes() const { return sent_by_nodes > to_this_host ? sent_by_nodes - to_this_host : 0; }
    };
    LinkBytes link_bytes() const;

    // What the set-up removed that killed runs had left (a line per run; none when nothing was left).
    const std::vector<std::string>& cleaned() const { return m_cleaned; }

private:
    void teardown() noexcept;

    NodeLinks m_links;
    int m_ranks_per_node = 1;
    std::string m_prefix;  // "us<pid>"
    std::string m_dir;     // the hostfile and the agent script
    std::string m_hostfile, m_agent, m_bridge, m_bridge_ip, m_subnet;
    std::vector<std::string> m_nodes, m_addresses, m_cleaned;
    bool m_netem = false;
};

}  // namespace us::app
