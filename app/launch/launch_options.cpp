// The launch flags, one table of who declares which with what help, and their rules (launch_options.h).
#include "app/launch/launch_options.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/core/check.h"
#include "common/settings/above_zero.h"

namespace us::app {

namespace {

enum class Field { ranks, mpirun, hostfile, launcher, stream_listen, nodes, gbps, latency, placement, progress };

// A flag as one command declares it; names == nullptr: that command has no such flag.
struct FlagText {
    const char* names = nullptr;
    const char* help = nullptr;
    const char* type = nullptr;  // the value's name in the help (nullptr: CLI11's)
};

struct LaunchFlag {
    Field field;
    FlagText run, gui, calibrate;
};

// clang-format off
const LaunchFlag kLaunchFlags[] = {
    {Field::ranks,
     {"-n,--ranks", "Ranks (default: dp x pp x tp x cp of the flags)", "RANKS"},
     {"-n,--ranks", "Ranks of the launched run (default: the layout's; dp 2 x pp 2 = 4)", "RANKS"},
     {}},
    {Field::stream_listen,
     {"--listen", "The address the ranks stream back to (default 127.0.0.1)", "ADDR"},
     {"--stream-listen", "The address launched ranks stream back to (default 127.0.0.1; multi-host: this machine's "
                         "address on the hosts' network, or 0.0.0.0)", "ADDR"},
     {}},
    {Field::mpirun, {"--mpirun", "The mpirun to launch with", "PATH"}, {}, {}},
    {Field::hostfile,
     {"--hostfile", "Launch ranks on the hosts of an Open MPI hostfile", "FILE"},
     {"--hostfile", "Launch ranks on the hosts of an Open MPI hostfile (with --stream-listen)", "FILE"},
     {}},
    {Field::launcher,
     {"--launcher", "mpirun (default) or srun (inside a Slurm allocation)", "L"},
     {"--launcher", "mpirun (default) or srun (inside a Slurm allocation)", "L"},
     {}},
    {Field::nodes,
     {"--nodes", "Emulate this many nodes on this machine (network namespaces, root; docs/nodes.md): ranks/nodes "
                 "ranks each, in rank order", "N"},
     {"--nodes", "Emulate this many nodes on this machine for the launched run (root; docs/nodes.md)", "N"},
     {"--nodes", "Also measure the link between N nodes emulated on this machine (root; docs/nodes.md): the "
                 "machine file's inter-node link"}},
    {Field::gbps,
     {"--inter-node-gbps", "With --nodes: the links between nodes, Gbit/s (tbf)", "G"},
     {"--inter-node-gbps", "With --nodes: the links between nodes, Gbit/s", "G"},
     {"--inter-node-gbps", "With --nodes: the emulated link's rate, Gbit/s"}},
    {Field::latency,
     {"--inter-node-latency-us", "With --nodes: one-way latency between nodes, us (netem, where the kernel has it)",
      "L"},
     {}, {}},
    {Field::placement,
     {"--node-placement", "With --nodes: block (consecutive ranks a node: tp inside a node) or cyclic (rank r on "
                          "node r mod N)", "P"},
     {}, {}},
    {Field::progress,
     {"--progress-timeout", "End the launch, with a message, if it shows no sign of life (a rank connecting, data, "
                            "output) for S seconds before its first step (default 300)", "S"},
     {},
     {"--progress-timeout", "End a measurement, with a message, that shows no progress (a measurement, a step) for "
                            "S seconds (default: 120, or 10 times the longest wait seen so far if longer)", "S"}},
};
// clang-format on

const FlagText& text_for(const LaunchFlag& f, LaunchCommand command) {
    switch (command) {
        case LaunchCommand::run:
            return f.run;
        case LaunchCommand::gui:
            return f.gui;
        case LaunchCommand::calibrate:
            break;
    }
    return f.calibrate;
}

CLI::Option* bind(CLI::App& cli, LaunchOptions& o, Field field, const FlagText& t) {
    switch (field) {
        case Field::ranks:  // given: a run of 1 to kMaxLaunchRanks ranks (0 stands for "not given")
            return cli.add_option(t.names, o.ranks, t.help)->check(CLI::Range(1, kMaxLaunchRanks));
        case Field::mpirun:
            return cli.add_option(t.names, o.mpirun, t.help);
        case Field::hostfile:
            return cli.add_option(t.names, o.hosts.hostfile, t.help);
        case Field::launcher:
            return cli.add_option(t.names, o.hosts.launcher, t.help);
        case Field::stream_listen:
            return cli.add_option(t.names, o.hosts.stream_listen, t.help);
        case Field::nodes:
            return cli.add_option(t.names, o.hosts.nodes.count, t.help);
        case Field::gbps:
            return cli.add_option(t.names, o.hosts.nodes.inter_node_gbps, t.help);
        case Field::latency:
            return cli.add_option(t.names, o.hosts.nodes.inter_node_latency_us, t.help);
        case Field::progress:
            return cli.add_option(t.names, o.progress_timeout_s, t.help)->check(above_zero());
        case Field::placement:
            break;
    }
    return cli.add_option(t.names, o.hosts.nodes.placement, t.help);
}

void check_launcher(const std::string& launcher) {
    US_CHECK_INPUT(launcher == "mpirun" || launcher == "srun", "unknown --launcher '{}': expected mpirun or srun",
                   launcher);
}

}  // namespace

void add_launch_flags(CLI::App& cli, LaunchOptions& o, LaunchCommand command) {
    for (const LaunchFlag& f : kLaunchFlags)
        if (const FlagText& t = text_for(f, command); t.names)
            if (CLI::Option* opt = bind(cli, o, f.field, t); t.type) opt->type_name(t.type);
}

void check_launch_flags(const CLI::App& cli, const LaunchOptions& o) {
    if (o.hosts.nodes.count == 0)
        for (const char* flag : {"--inter-node-gbps", "--inter-node-latency-us", "--node-placement"})
            if (const CLI::Option* opt = cli.get_option_no_throw(flag); opt && opt->count() > 0)
                fail_user("{} goes with --nodes N: the flags of the links between emulated nodes go with --nodes N",
                          flag);
    check_launcher(o.hosts.launcher);
    if (o.hosts.nodes.count != 0) validate_node_links(o.hosts.nodes, 0);  // the ranks are checked at the launch
}

void validate_node_links(const NodeLinks& links, int ranks) {
    US_CHECK_INPUT(links.count >= 2 && links.count <= 64, "--nodes must be 2 to 64 (got {})", links.count);
    US_CHECK_INPUT(ranks <= 0 || ranks % links.count == 0,
                   "--nodes {}: {} ranks do not split evenly over the nodes (each node holds ranks/nodes ranks, in "
                   "rank order: tp innermost, so a tp group stays inside a node)",
                   links.count, ranks);
    US_CHECK_INPUT(links.placement == "block" || links.placement == "cyclic",
                   "--node-placement is block or cyclic (got '{}')", links.placement);
    US_CHECK_INPUT(links.inter_node_gbps >= 0 && links.inter_node_latency_us >= 0,
                   "--inter-node-gbps and --inter-node-latency-us must not be negative");
}

void validate(const LaunchOptions& o) {
    US_CHECK_INPUT(o.ranks == 0 || (o.ranks >= 1 && o.ranks <= kMaxLaunchRanks),
                   "the number of ranks must be between 1 and {} (got {})", kMaxLaunchRanks, o.ranks);
    US_CHECK_INPUT(o.progress_timeout_s >= 0, "--progress-timeout must be a positive number of seconds (got {:g})",
                   o.progress_timeout_s);
    const HostOptions& h = o.hosts;
    check_launcher(h.launcher);
    US_CHECK_INPUT(h.hostfile.empty() || h.launcher == "mpirun",
                   "--hostfile goes with --launcher mpirun; under srun the hosts are the Slurm allocation's (choose "
                   "them with salloc/sbatch --nodelist)");
    if (h.nodes.count == 0) return;  // the links' values wait unused (the launch panel keeps them)
    US_CHECK_INPUT(h.hostfile.empty() && h.launcher == "mpirun",
                   "--nodes emulates the hosts itself: leave out --hostfile and --launcher");
    validate_node_links(h.nodes, o.ranks);
}

}  // namespace us::app
