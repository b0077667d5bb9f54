#include "app/launch/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "app/launch/hostfile.h"
#include "app/launch/launch_options.h"
#include "app/launch/process_guard.h"
#include "app/launch/stale_runs.h"
#include "common/core/check.h"

namespace us::app {

namespace fs = std::filesystem;

std::string default_train_binary() {
    if (const char* env = std::getenv("ULTRASCOPE_TRAIN"); env && *env) return env;
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const fs::path beside = self.parent_path() / "ultrascope-train";
        if (fs::exists(beside)) return beside.string();
    }
    return US_TRAIN_BINARY;
}

std::vector<HostEntry> check_launch_spec(const LaunchSpec& spec) {
    validate(LaunchOptions{spec.ranks, spec.mpirun, HostOptions{spec.launcher, spec.hostfile}});
    return spec.hostfile.empty() ? std::vector<HostEntry>{} : read_hostfile(spec.hostfile);
}

std::string find_mpirun(const std::string& requested, std::string& why, const std::string& launcher) {
    std::string name = requested;
    if (name.empty()) {
        const char* env = std::getenv(launcher == "srun" ? "ULTRASCOPE_SRUN" : "ULTRASCOPE_MPIRUN");
        name = env && *env ? env : launcher;
    }
    if (name.find('/') != std::string::npos) {
        if (::access(name.c_str(), X_OK) == 0) return name;
        why = name + " is not an executable file";
        return {};
    }
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/bin:/bin";
    size_t start = 0;
    while (start <= dirs.size()) {
        const size_t end = std::min(dirs.find(':', start), dirs.size());
        const std::string candidate = dirs.substr(start, end - start) + "/" + name;
        if (::access(candidate.c_str(), X_OK) == 0) return candidate;
        start = end + 1;
    }
    why = launcher == "srun"
              ? "'" + name + "' was not found on PATH: --launcher srun needs Slurm (run inside salloc or sbatch)"
              : "'" + name +
                    "' was not found on PATH: install Open MPI (apt-get install openmpi-bin; "
                    "./quickstart.sh does it)";
    return {};
}

Launcher::~Launcher() {
    if (running()) stop(2000);
    if (m_output_fd >= 0) ::close(m_output_fd);
}

namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

// Threads per rank: this machine's cores over the ranks on one host (all of them, unless a hostfile spreads them;
// hosts are taken to be alike).
int threads_for(const LaunchSpec& spec, const std::vector<HostEntry>& hosts) {
    const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    const int ranks_per_host =
        hosts.empty() || spec.hosts_share_cores ? spec.ranks : (spec.ranks + int(hosts.size()) - 1) / int(hosts.size());
    return spec.threads_per_rank > 0 ? spec.threads_per_rank : std::max(1, cores / ranks_per_host);
}

// How OpenMP threads wait at a barrier (libgomp reads it at load, so it travels in the environment). Ranks that share
// cores must not spin on each other's cores: passive. Otherwise spin briefly, then sleep: a spin count of 3000 was as
// fast as an unbounded spin (OMP_WAIT_POLICY=ACTIVE) on an idle machine (7,113 vs 7,175 tokens/s) and 26% faster
// beside one busy process (3,398 vs 2,695), where a spinning thread waits for a descheduled one at every parallel
// region (docs/performance.md). What the user set is kept.
Env wait_policy(int threads, int ranks) {
    const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    const bool oversubscribed = threads * ranks > cores;
    const bool user_wait = std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT");
    if (oversubscribed) return {{"OMP_WAIT_POLICY", "PASSIVE"}};
    if (!user_wait) return {{"GOMP_SPINCOUNT", "3000"}};
    return {};
}

// mpirun's own arguments (or srun's), before the program it launches.
std::vector<std::string> launcher_argv(const LaunchSpec& spec, const std::string& mpirun, const Env& wait_env) {
    if (spec.launcher == "srun")  // Slurm passes the whole environment (--export=ALL) and wires MPI through PMIx.
        return {mpirun, "-n", std::to_string(spec.ranks), "--export=ALL", "--mpi=pmix", "--kill-on-bad-exit=1"};
    std::vector<std::string> argv = {mpirun, "-n", std::to_string(spec.ranks), "--oversubscribe", "--bind-to", "none"};
    if (!spec.hostfile.empty()) argv.insert(argv.end(), {"--hostfile", spec.hostfile});
    argv.insert(argv.end(), spec.mpirun_args.begin(), spec.mpirun_args.end());
    // Ranks on this host alone talk through shared memory and the loopback: an interface that comes or goes meanwhile
    // (a VPN, the bridge of another run's emulated nodes) cannot break their wire-up.
    if (spec.hostfile.empty() && spec.mpirun_args.empty())
        for (const char* flag : {"oob_tcp_if_include", "btl_tcp_if_include"})
            argv.insert(argv.end(), {"--mca", flag, "lo"});
    // Shared-memory transport without the cross-memory-attach syscall, which containers often forbid.
    for (const char* a : {"--mca", "btl_vader_single_copy_mechanism", "none"}) argv.push_back(a);
    // mpirun hands ranks on other hosts only the variables named here: those set below, and a testing aid when it
    // is set.
    std::vector<const char*> forwarded = {"ULTRASCOPE_TOKEN", "ULTRASCOPE_STOP_WITH_LISTENER", "OMP_NUM_THREADS",
                                          "OPENBLAS_NUM_THREADS", kLaunchOwnerVariable};
    for (const char* var : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "ULTRASCOPE_FAKE_CLOCK_OFFSET_NS"}) {
        const bool ours =
            std::any_of(wait_env.begin(), wait_env.end(), [&](const auto& kv) { return kv.first == var; });
        if (ours || std::getenv(var)) forwarded.push_back(var);
    }
    for (const char* var : forwarded) argv.insert(argv.end(), {"-x", var});
    return argv;
}

// The child's environment, built before fork: after fork only async-signal-safe calls are allowed.
std::vector<std::string> child_env(const LaunchSpec& spec, int threads, const Env& wait_env) {
    std::vector<std::string> env;
    auto set = [&](const std::string& key, const std::string& value) {
        std::erase_if(env, [&](const std::string& e) { return e.rfind(key + "=", 0) == 0; });
        env.push_back(key + "=" + value);
    };
    for (char** e = environ; *e; ++e) env.emplace_back(*e);
    set("ULTRASCOPE_TOKEN", spec.token);
    // A launched run stops when its listener goes away (ultrascope-train: every rank at the same step); a run
    // started elsewhere and attached keeps training.
    set("ULTRASCOPE_STOP_WITH_LISTENER", spec.connect.empty() ? "0" : "1");
    set("OMP_NUM_THREADS", std::to_string(threads));
    set("OPENBLAS_NUM_THREADS", std::to_string(threads));
    for (const auto& [key, value] : wait_env) set(key, value);
    set("OMPI_MCA_mpi_yield_when_idle", "1");
    set(kLaunchOwnerVariable, owner_tag(this_process()));  // the launch mark: stale_runs.h finds orphans by it
    if (::geteuid() == 0) {
        set("OMPI_ALLOW_RUN_AS_ROOT", "1");
        set("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    return env;
}

// Forks and executes argv in a process group of its own (registered with the stop signals), its output merged into a
// pipe; returns its pid and sets `output_fd` to the pipe's reading end (non-blocking).
pid_t spawn(std::vector<std::string>& argv_text, std::vector<std::string>& env, int& output_fd) {
    std::vector<char*> argv, envp;
    for (auto& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    int pipe_fds[2];
    US_CHECK_INPUT(::pipe2(pipe_fds, O_CLOEXEC) == 0, "cannot create a pipe: {}", std::strerror(errno));
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    US_CHECK_INPUT(pid >= 0, "cannot fork: {}", std::strerror(errno));
    if (pid == 0) {
        ::setpgid(0, 0);  // one group: stop() reaches mpirun and the ranks it forks
        // If this program dies (even by SIGKILL), mpirun gets SIGTERM and stops its ranks. Kept across execve.
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (::getppid() != parent) ::_exit(143);  // the parent died before the line above
        ::dup2(pipe_fds[1], STDOUT_FILENO);
        ::dup2(pipe_fds[1], STDERR_FILENO);
        ::execve(argv[0], argv.data(), envp.data());
        static const char msg[] = "ultrascope: cannot execute mpirun\n";
        [[maybe_unused]] auto w = ::write(STDERR_FILENO, msg, sizeof msg - 1);
        ::_exit(127);
    }
    ::setpgid(pid, pid);
    register_child_group(pid);  // from now on a stop signal reaches it
    ::close(pipe_fds[1]);
    output_fd = pipe_fds[0];
    ::fcntl(output_fd, F_SETFL, ::fcntl(output_fd, F_GETFL) | O_NONBLOCK);
    return pid;
}

}  // namespace

void Launcher::start(const LaunchSpec& spec) {
    US_CHECK_INPUT(spec.ranks >= 1 && spec.ranks <= 1024, "the number of ranks must be between 1 and 1024 (got {})",
                   spec.ranks);
    const std::vector<HostEntry> hosts = check_launch_spec(spec);
    std::string why;
    const std::string mpirun = find_mpirun(spec.mpirun, why, spec.launcher);
    US_CHECK_INPUT(!mpirun.empty(), "cannot launch: {}", why);
    const std::string binary = spec.train_binary.empty() ? default_train_binary() : spec.train_binary;
    US_CHECK_INPUT(::access(binary.c_str(), X_OK) == 0, "cannot launch: {} is missing (build it: cmake --build build)",
                   binary);
    m_threads = threads_for(spec, hosts);
    // --threads among the training flags is what the ranks run with (and the wait policy must know it)
    if (const auto given = std::find(spec.train_args.begin(), spec.train_args.end(), "--threads");
        given != spec.train_args.end() && given + 1 != spec.train_args.end())
        m_threads = std::max(1, std::atoi(given[1].c_str()));
    const Env wait_env = wait_policy(m_threads, spec.ranks);
    m_argv = launcher_argv(spec, mpirun, wait_env);
    m_argv.push_back(binary);
    m_argv.insert(m_argv.end(), spec.train_args.begin(), spec.train_args.end());
    if (std::find(spec.train_args.begin(), spec.train_args.end(), "--threads") == spec.train_args.end())
        m_argv.insert(m_argv.end(), {"--threads", std::to_string(m_threads)});
    if (!spec.connect.empty()) m_argv.insert(m_argv.end(), {"--connect", spec.connect});
    std::vector<std::string> argv = m_argv, env = child_env(spec, m_threads, wait_env);
    m_notes = end_orphaned_launches();  // a killed launch's processes, before this one's start beside them
    if (spec.hostfile.empty() && spec.launcher == "mpirun") {  // ranks on this machine only: a folder here serves them
        for (std::string& note : m_shm.make()) m_notes.push_back(std::move(note));
        if (const std::string entry = m_shm.environment_entry(); !entry.empty()) env.push_back(entry);
    }
    m_pid = spawn(argv, env, m_output_fd);
    m_exit.reset();
    m_ending = false;
    m_tree.clear();
}

std::optional<int> Launcher::poll() {
    if (m_exit || m_pid <= 0) return m_exit;
    int status = 0;
    const pid_t r = ::waitpid(m_pid, &status, WNOHANG);
    if (r == m_pid) {
        m_exit = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        unregister_child_group(m_pid);         // the group may be reused by another process from now on
        if (m_ending) kill_processes(m_tree);  // mpirun went; a rank it could not stop does not stay
        m_shm.remove();
    } else if (m_ending && std::chrono::steady_clock::now() >= m_kill_at) {
        kill_tree();
    }
    return m_exit;
}

void Launcher::end(int grace_ms) {
    if (!running() || m_ending) return;
    m_ending = true;
    m_tree = process_tree(m_pid);  // before mpirun goes: its children would go to init, out of the tree's reach
    m_kill_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
    terminate_child_group_once(m_pid);  // mpirun passes it on to its ranks
}

// SIGKILL to every process of the tree, as found when the stop began and as it is now, and to the group; then
// mpirun is reaped.
void Launcher::kill_tree() {
    std::vector<ProcessId> tree = process_tree(m_pid);
    tree.insert(tree.end(), m_tree.begin(), m_tree.end());
    kill_processes(tree);
    ::kill(-m_pid, SIGKILL);
    int status;
    while (::waitpid(m_pid, &status, 0) < 0 && errno == EINTR) {
    }
    m_exit = 128 + SIGKILL;
    unregister_child_group(m_pid);
    kill_processes(m_tree);  // what was re-parented meanwhile
    m_shm.remove();
}

void Launcher::stop(int grace_ms) {
    end(grace_ms);
    while (running() && !poll()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

std::string Launcher::describe_tree() const {
    const std::string text = running() ? describe_processes(process_tree(m_pid)) : std::string();
    // empty where /proc could not be read: a memory cgroup at its limit refuses even this program's reads
    return text.empty() ? "none could be read from /proc (this program may be short of memory itself)" : text;
}

void Launcher::signal(int sig) {
    if (running()) ::kill(m_pid, sig);
}

std::string Launcher::take_output() {
    std::string out;
    if (m_output_fd < 0) return out;
    char buf[4096];
    for (;;) {
        const ssize_t n = ::read(m_output_fd, buf, sizeof buf);
        if (n <= 0) break;
        out.append(buf, size_t(n));
    }
    return out;
}

}  // namespace us::app
