// Process identities, trees and launch marks read from /proc (process_tree.h).
#include "app/launch/process_tree.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

namespace us::app {

namespace {

// /proc/PID/stat: "PID (COMM) STATE PPID ... STARTTIME(22nd) ...": the command may hold spaces and parentheses, so
// the fields are counted after the last ')'.
struct Stat {
    char state = 0;
    pid_t ppid = 0;
    uint64_t start = 0;
    std::string name;
};

bool read_stat(pid_t pid, Stat& s) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    if (!std::getline(in, text)) return false;
    const size_t open = text.find('('), close = text.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open) return false;
    s.name = text.substr(open + 1, close - open - 1);
    std::istringstream rest(text.substr(close + 1));
    std::string field;
    rest >> s.state >> s.ppid;
    for (int i = 5; i < 22 && rest >> field; ++i) {
    }
    rest >> s.start;
    return bool(rest);
}

std::vector<pid_t> all_pids() {
    std::vector<pid_t> pids;
    if (DIR* d = ::opendir("/proc")) {
        while (const dirent* e = ::readdir(d))
            if (const pid_t pid = pid_t(std::atol(e->d_name)); pid > 0) pids.push_back(pid);
        ::closedir(d);
    }
    return pids;
}

}  // namespace

uint64_t process_start_ticks(pid_t pid) {
    Stat s;
    return pid > 0 && read_stat(pid, s) && s.state != 'Z' && s.state != 'X' ? s.start : 0;
}

ProcessId this_process() { return {::getpid(), process_start_ticks(::getpid())}; }

bool still_running(const ProcessId& p) {
    const uint64_t start = process_start_ticks(p.pid);
    return start != 0 && (p.start == 0 || start == p.start);
}

std::string owner_tag(const ProcessId& p) { return std::to_string(p.pid) + "." + std::to_string(p.start); }

ProcessId parse_owner_tag(const std::string& text) {
    char* end = nullptr;
    const long pid = std::strtol(text.c_str(), &end, 10);
    if (end == text.c_str() || *end != '.' || pid <= 0) return {};
    const char* start_text = end + 1;
    const unsigned long long start = std::strtoull(start_text, &end, 10);
    if (end == start_text) return {};
    return {pid_t(pid), uint64_t(start)};
}

std::vector<ProcessId> process_tree(pid_t root) {
    std::multimap<pid_t, ProcessId> children;  // parent -> child
    for (const pid_t pid : all_pids()) {
        Stat s;
        if (read_stat(pid, s) && s.state != 'Z') children.emplace(s.ppid, ProcessId{pid, s.start});
    }
    std::vector<ProcessId> tree;
    if (const uint64_t start = process_start_ticks(root); start != 0) tree.push_back({root, start});
    for (size_t i = 0; i < tree.size(); ++i) {
        const auto [first, last] = children.equal_range(tree[i].pid);
        for (auto it = first; it != last; ++it) tree.push_back(it->second);
    }
    return tree;
}

int kill_processes(const std::vector<ProcessId>& processes) {
    int signalled = 0;
    for (const ProcessId& p : processes)
        if (still_running(p) && ::kill(p.pid, SIGKILL) == 0) ++signalled;
    return signalled;
}

std::vector<MarkedProcess> marked_processes() {
    const std::string key = std::string(kLaunchOwnerVariable) + "=";
    const pid_t self = ::getpid();
    std::vector<MarkedProcess> marked;
    for (const pid_t pid : all_pids()) {
        if (pid == self) continue;
        std::ifstream in("/proc/" + std::to_string(pid) + "/environ");  // unreadable: another user's
        for (std::string var; std::getline(in, var, '\0');) {
            if (var.rfind(key, 0) != 0) continue;
            Stat s;
            if (read_stat(pid, s) && s.state != 'Z')
                marked.push_back({{pid, s.start}, parse_owner_tag(var.substr(key.size())), s.name});
            break;
        }
    }
    return marked;
}

}  // namespace us::app
