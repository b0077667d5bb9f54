#include "app/launch/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "app/launch/hostfile.h"
#include "app/launch/process_guard.h"
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
    US_CHECK_INPUT(spec.launcher == "mpirun" || spec.launcher == "srun",
                   "unknown --launcher '{}': expected mpirun or srun", spec.launcher);
    US_CHECK_INPUT(spec.hostfile.empty() || spec.launcher == "mpirun",
                   "--hostfile goes with --launcher mpirun; under srun the hosts are the Slurm allocation's (choose "
                   "them with salloc/sbatch --nodelist)");
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
    // Threads per rank: this machine's cores over the ranks on one host (all of them, unless a hostfile spreads them;
    // hosts are taken to be alike).
    const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    const int ranks_per_host =
        hosts.empty() || spec.hosts_share_cores ? spec.ranks : (spec.ranks + int(hosts.size()) - 1) / int(hosts.size());
    m_threads = spec.threads_per_rank > 0 ? spec.threads_per_rank : std::max(1, cores / ranks_per_host);
    const bool threads_given =
        std::find(spec.train_args.begin(), spec.train_args.end(), "--threads") != spec.train_args.end();
    // How OpenMP threads wait at a barrier (libgomp reads it at load, so it travels in the environment). Ranks that
    // share cores must not spin on each other's cores: passive. Otherwise spin briefly, then sleep: a spin count of
    // 3000 was as fast as an unbounded spin (OMP_WAIT_POLICY=ACTIVE) on an idle machine (7,113 vs 7,175 tokens/s) and
    // 26% faster beside one busy process (3,398 vs 2,695), where a spinning thread waits for a descheduled one at
    // every parallel region (docs/performance.md). What the user set is kept.
    const bool oversubscribed = m_threads * spec.ranks > cores;
    const bool user_wait = std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT");
    std::vector<std::pair<std::string, std::string>> wait_env;
    if (oversubscribed)
        wait_env.push_back({"OMP_WAIT_POLICY", "PASSIVE"});
    else if (!user_wait)
        wait_env.push_back({"GOMP_SPINCOUNT", "3000"});

    if (spec.launcher == "srun") {
        // Slurm passes the whole environment (--export=ALL) and wires MPI through PMIx.
        m_argv = {mpirun, "-n", std::to_string(spec.ranks), "--export=ALL", "--mpi=pmix", "--kill-on-bad-exit=1"};
    } else {
        m_argv = {mpirun, "-n", std::to_string(spec.ranks), "--oversubscribe", "--bind-to", "none"};
        if (!spec.hostfile.empty()) m_argv.insert(m_argv.end(), {"--hostfile", spec.hostfile});
        m_argv.insert(m_argv.end(), spec.mpirun_args.begin(), spec.mpirun_args.end());
        // Ranks on this host alone talk through shared memory and the loopback: an interface that comes or goes
        // meanwhile (a VPN, the bridge of another run's emulated nodes) cannot break their wire-up.
        if (spec.hostfile.empty() && spec.mpirun_args.empty())
            for (const char* flag : {"oob_tcp_if_include", "btl_tcp_if_include"})
                m_argv.insert(m_argv.end(), {"--mca", flag, "lo"});
        // Shared-memory transport without the cross-memory-attach syscall, which containers often forbid.
        for (const char* a : {"--mca", "btl_vader_single_copy_mechanism", "none"}) m_argv.push_back(a);
        // mpirun hands ranks on other hosts only the variables named here: those set below, and a testing aid
        // when it is set.
        std::vector<const char*> forwarded = {"ULTRASCOPE_TOKEN", "ULTRASCOPE_STOP_WITH_LISTENER", "OMP_NUM_THREADS",
                                              "OPENBLAS_NUM_THREADS"};
        for (const char* var : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "ULTRASCOPE_FAKE_CLOCK_OFFSET_NS"}) {
            const bool ours =
                std::any_of(wait_env.begin(), wait_env.end(), [&](const auto& kv) { return kv.first == var; });
            if (ours || std::getenv(var)) forwarded.push_back(var);
        }
        for (const char* var : forwarded) m_argv.insert(m_argv.end(), {"-x", var});
    }
    m_argv.push_back(binary);
    m_argv.insert(m_argv.end(), spec.train_args.begin(), spec.train_args.end());
    if (!threads_given) {
        m_argv.push_back("--threads");
        m_argv.push_back(std::to_string(m_threads));
    }
    if (!spec.connect.empty()) {
        m_argv.push_back("--connect");
        m_argv.push_back(spec.connect);
    }

    // The child's environment, built before fork: after fork only async-signal-safe calls are allowed.
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
    set("OMP_NUM_THREADS", std::to_string(m_threads));
    set("OPENBLAS_NUM_THREADS", std::to_string(m_threads));
    for (const auto& [key, value] : wait_env) set(key, value);
    set("OMPI_MCA_mpi_yield_when_idle", "1");
    if (::geteuid() == 0) {
        set("OMPI_ALLOW_RUN_AS_ROOT", "1");
        set("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    std::vector<char*> argv, envp;
    for (auto& a : m_argv) argv.push_back(a.data());
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
    register_child_group(pid);
    ::close(pipe_fds[1]);
    m_output_fd = pipe_fds[0];
    ::fcntl(m_output_fd, F_SETFL, ::fcntl(m_output_fd, F_GETFL) | O_NONBLOCK);
    m_pid = pid;
    m_exit.reset();
}

std::optional<int> Launcher::poll() {
    if (m_exit || m_pid <= 0) return m_exit;
    int status = 0;
    const pid_t r = ::waitpid(m_pid, &status, WNOHANG);
    if (r == m_pid) {
        m_exit = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        unregister_child_group(m_pid);  // the group may be reused by another process from now on
    }
    return m_exit;
}

void Launcher::stop(int grace_ms) {
    if (!running()) return;
    terminate_child_group_once(m_pid);  // mpirun passes it on to its ranks
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
    while (!poll() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!poll()) {
        ::kill(-m_pid, SIGKILL);
        int status;
        ::waitpid(m_pid, &status, 0);
        m_exit = 128 + SIGKILL;
        unregister_child_group(m_pid);
    }
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
