// Starts `mpirun ... ultrascope-train` as a child in its own process group, with the environment a run needs
// (the run token, threads per rank = cores / ranks, Open MPI's settings for root and oversubscription), watches
// it without blocking, captures its output, and stops it (SIGTERM to mpirun, then SIGKILL to every process of its
// tree after a grace period: a stalled rank answers no SIGTERM). Every process it launches carries the launch mark
// (process_tree.h), so whatever a killed launcher leaves is found by the next (stale_runs.h). Shared by `ultrascope
// run`, calibrate, the lessons and the GUI.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <sys/types.h>
#include <utility>
#include <vector>

#include "app/launch/hostfile.h"
#include "app/launch/process_tree.h"
#include "app/launch/shm_folder.h"

namespace us::app {

struct LaunchSpec {
    int ranks = 2;
    std::vector<std::string> train_args;   // ultrascope-train flags
    std::string connect;                   // HOST:PORT of the listener; empty: no live stream
    std::string token;                     // handed to the ranks in ULTRASCOPE_TOKEN
    int threads_per_rank = 0;              // 0: max(1, cores / ranks), unless train_args set --threads
    std::string train_binary;              // empty: the ultrascope-train next to this program
    std::string mpirun;                    // empty: `mpirun` on PATH (or $ULTRASCOPE_MPIRUN; srun: $ULTRASCOPE_SRUN)
    std::string launcher = "mpirun";       // mpirun | srun (Slurm: the hosts are the allocation's)
    std::string hostfile;                  // mpirun --hostfile: ranks on several hosts
    std::vector<std::string> mpirun_args;  // more of mpirun's arguments (emulated nodes: the agent, the subnet)
    bool hosts_share_cores = false;        // the hostfile's hosts are this machine's (emulated nodes)
};

// Checks what can be checked before anything starts (the launch options' rules, launch_options.h, and the
// hostfile's lines) and returns the hostfile's hosts (none without one); UserError with what to do otherwise.
std::vector<HostEntry> check_launch_spec(const LaunchSpec& spec);

// The ultrascope-train to launch: $ULTRASCOPE_TRAIN, else next to the running executable, else the build tree's.
std::string default_train_binary();
// Where mpirun is, or an empty string (with `why` set) when it cannot be found.
std::string find_mpirun(const std::string& requested, std::string& why, const std::string& launcher = "mpirun");

class Launcher {
public:
    Launcher() = default;
    ~Launcher();
    Launcher(const Launcher&) = delete;
    Launcher& operator=(const Launcher&) = delete;

    // Throws UserError (mpirun or the binary missing, bad rank count) before anything starts.
    void start(const LaunchSpec& spec);
    // The exit code once the child has exited (signals as 128 + n), else nullopt. Never blocks.
    std::optional<int> poll();
    bool running() const { return m_pid > 0 && !m_exit; }
    // Asks the run to stop (SIGTERM to mpirun, which passes it on) and waits; after grace_ms, SIGKILL to every
    // process of its tree, as found when the stop began and now.
    void stop(int grace_ms = 5000);
    // Sends `sig` to mpirun (or srun) alone, which passes SIGUSR1 and SIGUSR2 on to every rank.
    void signal(int sig);
    // The same without waiting (a frame loop, a watcher that found the run stalled): poll() escalates to SIGKILL
    // once grace_ms have passed, and when the child exits, ends whatever of its tree is left.
    void end(int grace_ms = 3000);
    bool ending() const { return m_ending; }
    // What the processes of its tree are doing now (process_tree.h: describe_processes), for a stalled launch's
    // message.
    std::string describe_tree() const;
    // Lines on what the start cleaned up after killed launches (stale_runs.h), once.
    std::vector<std::string> take_notes() { return std::exchange(m_notes, {}); }
    // Output (stdout and stderr merged) produced since the last call. Never blocks.
    std::string take_output();
    const std::vector<std::string>& command_line() const { return m_argv; }
    int threads_per_rank() const { return m_threads; }

private:
    void kill_tree();

    pid_t m_pid = -1;
    int m_output_fd = -1;
    bool m_ending = false;
    std::chrono::steady_clock::time_point m_kill_at;
    std::vector<ProcessId> m_tree;  // the tree when the stop began
    std::vector<std::string> m_notes;
    std::optional<int> m_exit;
    std::vector<std::string> m_argv;
    int m_threads = 1;
    ShmFolder m_shm;  // Open MPI's shared-memory segments of a local launch, removed when it ends
};

}  // namespace us::app
