// A system tool run to its end, or to its time limit (system_tool.h).
#include "app/launch/system_tool.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/core/check.h"

namespace us::app {

ToolResult run_tool(const std::vector<std::string>& argv, double limit_seconds) {
    std::vector<char*> args;  // before fork: only async-signal-safe calls after it
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    int fds[2];
    US_CHECK_INPUT(::pipe2(fds, O_CLOEXEC) == 0, "pipe: {}", std::strerror(errno));
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(fds[1], 1), ::dup2(fds[1], 2);
        ::execvp(args[0], args.data());
        ::_exit(127);
    }
    ::close(fds[1]);
    ToolResult r;
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_seconds);
    bool late = false;
    for (char buf[4096];;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
        pollfd p = {fds[0], POLLIN, 0};
        const int ready = left.count() > 0 ? ::poll(&p, 1, int(left.count())) : 0;
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) {
            late = true;
            break;
        }
        const ssize_t n = ::read(fds[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        r.output.append(buf, size_t(n));
    }
    ::close(fds[0]);
    if (late) ::kill(pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    r.code = late ? 124 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (late) r.output += fmt::format("(did not finish within {:g} s: killed)", limit_seconds);
    return r;
}

std::string joined(const std::vector<std::string>& argv) {
    std::string s;
    for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
    return s;
}

}  // namespace us::app
