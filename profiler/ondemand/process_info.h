// What /proc says about a process that polls the daemon: its rank, world size and local rank (torchrun and Slurm
// put them in the environment), where Kineto may write (KINETO_ONDEMAND_TRACE_DIR), and whether it still runs.
// Kept apart from the registry so that a test or a replay supplies its own answers.
#pragma once

#include <functional>
#include <string>

namespace us::prof {

struct ProcessInfo {
    bool readable = false;  // false: /proc/PID/environ could not be read (gone, or another user's)
    int rank = -1, world_size = 0, local_rank = -1, local_world_size = 0;
    std::string trace_dir;          // KINETO_ONDEMAND_TRACE_DIR, or "" (then Kineto writes only under /tmp)
    std::string command;            // /proc/PID/comm, for messages
    bool launcher_command = false;  // its command line runs torchrun (torch.distributed.run / launch)
};

using ProcessInfoReader = std::function<ProcessInfo(int pid)>;
using ProcessAlive = std::function<bool(int pid)>;

// The live answers: /proc/PID/environ and /proc/PID/comm; alive means /proc/PID exists and is not a zombie.
ProcessInfo read_process_info(int pid);
bool process_alive(int pid);

// The value of NAME in a NUL-separated environment block ("" when absent); for tests of the parsing.
std::string environ_value(const std::string& block, const std::string& name);

}  // namespace us::prof
