// The processes a launch made, found through /proc and ended together: a process named by its id and start time
// (ids are reused; the pair is not), the tree below a process, and the mark every launched process carries in its
// environment (ULTRASCOPE_LAUNCH_OWNER: the launching program's id and start time), which lets a later run find what a
// killed one left running even after its tree fell apart (its processes re-parented to init).
#pragma once

#include <cstdint>
#include <string>
#include <sys/types.h>
#include <vector>

namespace us::app {

inline constexpr const char* kLaunchOwnerVariable = "ULTRASCOPE_LAUNCH_OWNER";

struct ProcessId {
    pid_t pid = 0;
    uint64_t start = 0;  // clock ticks after boot (/proc/PID/stat's 22nd field); 0: not known
    bool operator==(const ProcessId&) const = default;
};

// This process.
ProcessId this_process();
// The process's start time, or 0 when it no longer runs (gone, or a zombie nobody reaped yet).
uint64_t process_start_ticks(pid_t pid);
// Whether the process still runs and is the same one (same start time, where it is known).
bool still_running(const ProcessId& p);
// "PID.START", and back (a pid of 0 when the text is not one).
std::string owner_tag(const ProcessId& p);
ProcessId parse_owner_tag(const std::string& text);

// `root` and every process below it, parents before their children: found in one pass over /proc before any is
// touched (a parent killed first would leave its children to init, out of reach of the tree).
std::vector<ProcessId> process_tree(pid_t root);
// SIGKILL to each that still runs (identity checked); how many were signalled.
int kill_processes(const std::vector<ProcessId>& processes);

// A process marked as launched by an ultrascope program, the program that launched it, and its name (comm).
struct MarkedProcess {
    ProcessId process, owner;
    std::string name;
};
// Every process whose environment this user may read and that carries the launch mark.
std::vector<MarkedProcess> marked_processes();

}  // namespace us::app
