// A user, network and mount namespace of this process's own (rootless_nodes.h).
#include "app/launch/rootless_nodes.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "app/launch/stale_runs.h"
#include "common/core/check.h"

namespace us::app {

namespace {

// Writes `text` to a /proc file of this process; false when it cannot.
bool write_proc(const char* path, const std::string& text) {
    std::ofstream out(path);
    out << text;
    out.flush();
    return out.good();
}

int threads_of_this_process() {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
    return 1;
}

}  // namespace

std::vector<std::string> enter_rootless_namespace() {
    // What killed runs left, seen from this machine's namespaces: inside the new user namespace this user may still
    // signal its orphans, but no longer read their environment, which marks them.
    std::vector<std::string> notes = end_orphaned_launches();
    for (std::string& line : stale_nodes_needing_root()) notes.push_back(std::move(line));
    const uid_t uid = ::geteuid();
    const gid_t gid = ::getegid();
    US_CHECK_INPUT(threads_of_this_process() == 1,
                   "--nodes without root: the process already runs several threads and cannot enter a user namespace "
                   "(run it as root: sudo ultrascope ...)");
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS) != 0) {
        const int err = errno;
        fail_user(
            "--nodes needs CAP_NET_ADMIN to make network namespaces and links, and this system does not let an "
            "unprivileged user make a user namespace to get it ({}). Run as root (sudo ultrascope ... --nodes N), "
            "or allow unprivileged user namespaces (sysctl user.max_user_namespaces=10000; on Debian before 11 "
            "kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 kernel.apparmor_restrict_unprivileged_userns=0), "
            "or on a real cluster use --hostfile or --launcher srun",
            std::strerror(err));
    }
    // This user is root inside, and only this user: setgroups must be denied before an unprivileged gid map.
    US_CHECK_INPUT(write_proc("/proc/self/setgroups", "deny") &&
                       write_proc("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1") &&
                       write_proc("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1"),
                   "--nodes without root: cannot map this user to root in its user namespace ({})",
                   std::strerror(errno));
    // A private /run: `ip netns` names the nodes' namespaces under /run/netns, which only root may create.
    US_CHECK_INPUT(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
                       ::mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=755") == 0,
                   "--nodes without root: cannot mount a private /run in its mount namespace ({})",
                   std::strerror(errno));
    // Open MPI's session directory is named after the user, root inside: keep it off a root-owned one in /tmp.
    US_CHECK_INPUT(::mkdir("/run/ompi", 0700) == 0 && ::setenv("OMPI_MCA_orte_tmpdir_base", "/run/ompi", 1) == 0,
                   "--nodes without root: cannot make a session folder in its private /run ({})", std::strerror(errno));
    const pid_t child = ::fork();  // the loopback of the new network, up (the listener and Open MPI use it)
    if (child == 0) {
        ::execlp("ip", "ip", "link", "set", "lo", "up", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    int status = 0;
    US_CHECK_INPUT(child > 0 && ::waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                   "--nodes needs `ip` and `tc`: apt-get install iproute2");
    return notes;
}

}  // namespace us::app
