// How many ranks a launched run has and where they run: the flags `ultrascope run`, `ultrascope calibrate` and the
// GUI share (-n/--ranks, --mpirun, --launcher, --hostfile, --listen/--stream-listen, --nodes, --inter-node-gbps,
// --inter-node-latency-us, --node-placement, --progress-timeout), declared and checked here only. Each command declares
// the ones it has, with its own help line (the table in launch_options.cpp); what a flag accepts and the rules between
// flags are the same for every command, the GUI's launch panel and the lessons.
#pragma once

#include <string>

#include "app/launch/emulated_nodes.h"

namespace CLI {
class App;
}

namespace us::app {

inline constexpr int kMaxLaunchRanks = 1024;  // the launcher's limit (mpirun -n)

// Where the ranks run: the launcher, an Open MPI hostfile, the address of this machine they stream back to, and
// nodes emulated on this machine (nodes.count > 0). What the launch panel's "hosts" edit.
struct HostOptions {
    std::string launcher = "mpirun";  // mpirun | srun (Slurm: the hosts are the allocation's)
    std::string hostfile;             // mpirun --hostfile: ranks on several hosts
    std::string stream_listen = "127.0.0.1";
    NodeLinks nodes{0};
    bool operator==(const HostOptions&) const = default;
};

struct LaunchOptions {
    int ranks = 0;       // 0: not given (the layout's, dp x pp x tp x cp)
    std::string mpirun;  // empty: `mpirun` (or `srun`) on PATH
    HostOptions hosts;
    // --progress-timeout S: a launch with no sign of progress for S seconds is ended with a message
    // (progress_deadline.h); 0: each command's default
    double progress_timeout_s = 0;
};

// The commands that take launch flags; each declares its own subset.
enum class LaunchCommand { run, gui, calibrate };

// Declares `command`'s launch flags on `cli`, bound to `o`.
void add_launch_flags(CLI::App& cli, LaunchOptions& o, LaunchCommand command);
// After parsing: each value given is one the flag accepts, and the links' flags came with --nodes N. UserError
// naming the flag otherwise.
void check_launch_flags(const CLI::App& cli, const LaunchOptions& o);
// Before a launch: every rule of the options, alone and together (the launcher and the hostfile, emulated nodes and
// the ranks they split). ranks 0: not known yet, the rules on them wait. UserError with what to do otherwise.
void validate(const LaunchOptions& o);
// The emulated nodes' rules (2 to 64 nodes, `ranks` split evenly over them when > 0, block or cyclic placement, no
// negative link): validate()'s part, and EmulatedNodes' for callers that make nodes themselves.
void validate_node_links(const NodeLinks& links, int ranks);

}  // namespace us::app
