// Entering a standing emulated node, and ending what runs on it (node_namespace.h).
#include "app/launch/node_namespace.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "app/launch/system_tool.h"

namespace us::app {

std::string enter_node(const std::string& node) {
    const std::string path = "/run/netns/" + node;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "cannot open " + path + ": " + std::strerror(errno);
    const bool joined = ::setns(fd, CLONE_NEWNET) == 0;
    const int err = errno;
    ::close(fd);
    if (!joined) return "cannot enter the network namespace " + node + ": " + std::strerror(err);
    if (::unshare(CLONE_NEWUTS) != 0) return std::string("cannot make a UTS namespace: ") + std::strerror(errno);
    if (::sethostname(node.c_str(), node.size()) != 0)
        return "cannot set the hostname " + node + ": " + std::strerror(errno);
    return "";
}

std::vector<ProcessId> node_processes(const std::string& node) {
    std::istringstream pids(run_tool({"ip", "netns", "pids", node}, 20).output);
    std::vector<ProcessId> inside;
    for (long pid; pids >> pid;)
        if (const uint64_t start = process_start_ticks(pid_t(pid)); start != 0) inside.push_back({pid_t(pid), start});
    return inside;
}

int end_processes(const std::vector<ProcessId>& processes, double grace_s) {
    for (const ProcessId& p : processes)
        if (still_running(p)) ::kill(p.pid, SIGTERM);
    int left = 0;
    for (int waited = 0; waited <= int(grace_s * 10); ++waited) {
        left = 0;
        for (const ProcessId& p : processes) left += still_running(p);
        if (left == 0) return 0;
        ::usleep(100000);
    }
    kill_processes(processes);
    return left;
}

}  // namespace us::app
