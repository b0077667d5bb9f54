// Nodes emulated with network namespaces, veth pairs, a bridge and tc (emulated_nodes.h).
#include "app/launch/emulated_nodes.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "app/launch/launch_options.h"
#include "app/launch/stale_runs.h"
#include "app/launch/system_tool.h"
#include "common/core/check.h"

namespace us::app {

namespace fs = std::filesystem;

namespace {

// Runs a setup step; UserError naming it when it fails.
void must(const std::vector<std::string>& argv) {
    const ToolResult r = run_tool(argv);
    US_CHECK_INPUT(r.code == 0, "emulated nodes: `{}` failed ({}): {}", joined(argv), r.code,
                   r.output.empty() ? "no output" : r.output);
}

// A /24 of 10.77.0.0/16 that no interface of this namespace uses.
std::string free_subnet(long pid) {
    const std::string used = run_tool({"ip", "-o", "-4", "addr", "show"}).output;
    for (int k = 0; k < 250; ++k) {
        const int third = int((pid + k) % 250);
        const std::string net = fmt::format("10.77.{}.", third);
        if (used.find(" " + net) == std::string::npos) return net;
    }
    fail_user("emulated nodes: every 10.77.X.0/24 subnet is in use on this machine");
}

// Shapes the egress of `dev` (in namespace `netns`, "" this one): tbf at `gbps`, or netem with `delay_us` (and the
// rate) where a latency is asked for.
void shape(const std::string& netns, const std::string& dev, double gbps, double delay_us) {
    std::vector<std::string> argv;
    if (!netns.empty()) argv = {"ip", "netns", "exec", netns};
    for (const char* a : {"tc", "qdisc", "add", "dev"}) argv.push_back(a);
    argv.insert(argv.end(), {dev, "root"});
    const std::string rate = fmt::format("{}mbit", std::max(1L, long(gbps * 1000)));
    if (delay_us > 0) {
        argv.insert(argv.end(), {"netem", "delay", fmt::format("{}us", long(delay_us))});
        if (gbps > 0) argv.insert(argv.end(), {"rate", rate});
    } else {
        // a burst of at least one millisecond at the rate (and 64 KiB): tbf needs one above the link's MTU
        const long burst = std::max(65536L, long(gbps * 1e9 / 8 / 1000));
        argv.insert(argv.end(), {"tbf", "rate", rate, "burst", std::to_string(burst), "latency", "50ms"});
    }
    must(argv);
}

}  // namespace

EmulatedNodes::EmulatedNodes(const NodeLinks& links, int ranks) : m_links(links) {
    validate_node_links(links, ranks);
    US_CHECK_INPUT(::geteuid() == 0,
                   "--nodes needs CAP_NET_ADMIN to make network namespaces and links: run as root (sudo "
                   "ultrascope ...), or `ultrascope run --nodes` from a shell (it makes a user namespace of its own "
                   "where the system allows it), or on a real cluster use --hostfile or --launcher srun");
    US_CHECK_INPUT(run_tool({"ip", "-V"}).code == 0, "--nodes needs `ip` and `tc`: apt-get install iproute2");
    m_ranks_per_node = ranks / links.count;
    m_cleaned = end_orphaned_launches();  // what a killed run left, before anything of this one is made
    for (const std::string& line : remove_stale_nodes()) m_cleaned.push_back(line);
    const long pid = long(::getpid());
    m_prefix = fmt::format("us{}", pid);
    m_bridge = m_prefix + "br";
    const std::string net = free_subnet(pid);
    m_subnet = net + "0/24", m_bridge_ip = net + "1";
    try {
        std::string folder = nodes_folder_template();  // named after this process, its owner file inside
        US_CHECK_INPUT(::mkdtemp(folder.data()) != nullptr, "mkdtemp: {}", std::strerror(errno));
        m_dir = folder;
        record_nodes_owner(m_dir);
        must({"ip", "link", "add", m_bridge, "type", "bridge"});
        must({"ip", "addr", "add", m_bridge_ip + "/24", "dev", m_bridge});
        must({"ip", "link", "set", m_bridge, "up"});
        for (int i = 0; i < links.count; ++i) {
            const std::string node = fmt::format("{}n{}", m_prefix, i);
            const std::string outside = fmt::format("{}v{}", m_prefix, i), inside = fmt::format("{}p{}", m_prefix, i);
            must({"ip", "netns", "add", node});
            m_nodes.push_back(node);
            must({"ip", "link", "add", outside, "type", "veth", "peer", "name", inside});
            must({"ip", "link", "set", inside, "netns", node});
            must({"ip", "link", "set", outside, "master", m_bridge, "up"});
            m_addresses.push_back(fmt::format("{}{}", net, i + 2));
            must({"ip", "netns", "exec", node, "ip", "addr", "add", m_addresses.back() + "/24", "dev", inside});
            must({"ip", "netns", "exec", node, "ip", "link", "set", inside, "up"});
            must({"ip", "netns", "exec", node, "ip", "link", "set", "lo", "up"});
            if (links.inter_node_gbps > 0 || links.inter_node_latency_us > 0) {
                // both directions: half the latency each way, the rate on each
                const double half = links.inter_node_latency_us / 2;
                try {
                    shape("", outside, links.inter_node_gbps, half);
                    shape(node, inside, links.inter_node_gbps, half);
                } catch (const UserError& e) {
                    const bool no_netem = half > 0 && std::string(e.what()).find("netem") != std::string::npos;
                    US_CHECK_INPUT(!no_netem,
                                   "--inter-node-latency-us needs the kernel's netem qdisc (sch_netem), which this "
                                   "kernel lacks (`modprobe sch_netem`, or leave the latency out: tbf still shapes "
                                   "the bandwidth). {}",
                                   e.what());
                    throw;
                }
                m_netem = half > 0;
            }
        }
        // Open MPI's rsh agent: "AGENT NODE COMMAND...": the command runs in the node's namespace, under its name.
        m_agent = m_dir + "/node-agent.sh";
        std::ofstream(m_agent)
            << "#!/bin/sh\n# written by ultrascope run --nodes: runs a command on an emulated node\n"
               "node=$1; shift\n"
               "exec ip netns exec \"$node\" unshare --uts sh -c 'hostname \"$0\"; exec sh -c \"$*\"' "
               "\"$node\" \"$@\"\n";
        fs::permissions(m_agent, fs::perms::owner_all);
        m_hostfile = m_dir + "/hostfile";
        std::ofstream hosts(m_hostfile);
        for (const std::string& node : m_nodes) hosts << node << " slots=" << m_ranks_per_node << "\n";
    } catch (...) {
        teardown();
        throw;
    }
}

EmulatedNodes::~EmulatedNodes() { teardown(); }

void EmulatedNodes::teardown() noexcept {
    try {
        for (const std::string& node : m_nodes) run_tool({"ip", "netns", "del", node});  // its veth pair goes too
        if (!m_bridge.empty()) run_tool({"ip", "link", "del", m_bridge});
        if (!m_dir.empty()) fs::remove_all(m_dir);
    } catch (...) {  // a teardown that fails leaves names the next run removes (stale_runs.h)
    }
    m_nodes.clear(), m_bridge.clear(), m_dir.clear();
}

std::vector<std::string> EmulatedNodes::mpirun_args() const {  // the hostfile goes as LaunchSpec::hostfile
    std::vector<std::string> args;
    if (m_links.placement == "cyclic") args = {"--map-by", "node"};
    for (const char* a : {"--mca", "plm_rsh_agent"}) args.push_back(a);
    args.push_back(m_agent);
    for (const char* flag : {"oob_tcp_if_include", "btl_tcp_if_include"})
        args.insert(args.end(), {"--mca", flag, m_subnet});
    args.insert(args.end(), {"--mca", "btl", "self,vader,tcp"});
    return args;
}

EmulatedNodes::LinkBytes EmulatedNodes::link_bytes() const {
    auto received = [](const std::string& dev) {  // what this end of the link received
        std::ifstream in("/sys/class/net/" + dev + "/statistics/rx_bytes");
        uint64_t bytes = 0;
        in >> bytes;
        return bytes;
    };
    LinkBytes b;
    // A node's veth end on the bridge receives all the node sends; the bridge itself, what is for this namespace.
    for (size_t i = 0; i < m_nodes.size(); ++i) b.sent_by_nodes += received(fmt::format("{}v{}", m_prefix, i));
    b.to_this_host = received(m_bridge);
    return b;
}

std::string EmulatedNodes::describe() const {
    std::string link = m_links.inter_node_gbps > 0 ? fmt::format("{:g} Gbit/s", m_links.inter_node_gbps) : "unshaped";
    if (m_links.inter_node_latency_us > 0)
        link += fmt::format(", {:g} us one way (netem)", m_links.inter_node_latency_us);
    return fmt::format("{} emulated nodes ({}), {} rank(s) each ({}), inter-node links {} over {} (bridge {})",
                       m_nodes.size(), joined(m_nodes), m_ranks_per_node,
                       m_links.placement == "block" ? "consecutive ranks" : "rank r on node r mod N", link, m_subnet,
                       m_bridge_ip);
}

}  // namespace us::app
