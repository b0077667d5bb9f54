// Finding and removing what killed runs left (stale_runs.h).
#include "app/launch/stale_runs.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "app/launch/process_tree.h"
#include "app/launch/system_tool.h"

namespace us::app {

namespace fs = std::filesystem;

namespace {

const char* const kNodesFolderPrefix = "ultrascope-nodes-us";

std::string pid_namespace(const std::string& pid) {
    std::error_code ec;
    const fs::path link = fs::read_symlink("/proc/" + pid + "/ns/pid", ec);
    return ec ? std::string() : link.string();
}

// The process id in one of our names: "us1234n0", "us1234br", "us1234v0" (`ip link` may add "@if5"), or -1.
long pid_in_name(const std::string& name) {
    if (name.rfind("us", 0) != 0) return -1;
    size_t i = 2;
    long pid = 0;
    while (i < name.size() && std::isdigit(uint8_t(name[i]))) pid = pid * 10 + (name[i++] - '0');
    if (i == 2 || i >= name.size()) return -1;
    const char kind = name[i];
    return kind == 'n' || kind == 'v' || kind == 'p' || name.compare(i, 2, "br") == 0 ? pid : -1;
}

// One owner's leftovers.
struct Leftovers {
    std::vector<std::string> folders, namespaces, links;
};

// Whether the owner no longer runs. Its folder's `owner` file tells it from a process that took its id since; an
// owner in another pid namespace (a container sharing /tmp) cannot be told, and counts as running.
bool owner_gone(long pid, const Leftovers& left) {
    if (pid == long(::getpid())) return false;
    for (const std::string& folder : left.folders) {
        std::ifstream in(folder + "/owner");
        std::string tag, pidns;
        if (!(in >> tag >> pidns)) continue;
        if (pidns != pid_namespace("self")) return false;
        return !still_running(parse_owner_tag(tag));
    }
    return process_start_ticks(pid_t(pid)) == 0;
}

// Every name of ours in the nodes' folders, `ip netns list` and `ip -o link show`, by owner.
std::map<long, Leftovers> find_leftovers(bool names) {
    std::map<long, Leftovers> by_owner;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/tmp", ec)) {
        const std::string name = e.path().filename().string();
        long pid = -1;
        if (name.rfind(kNodesFolderPrefix, 0) == 0) {
            pid = std::atol(name.c_str() + std::strlen(kNodesFolderPrefix));
        } else if (name.rfind("ultrascope-nodes-", 0) == 0) {  // named before the owner was: its hostfile's nodes
            std::ifstream hostfile(e.path() / "hostfile");
            std::string node;
            hostfile >> node;
            pid = pid_in_name(node);
        }
        if (pid > 0) by_owner[pid].folders.push_back(e.path().string());
    }
    if (!names) return by_owner;
    std::istringstream netns(run_tool({"ip", "netns", "list"}, 20).output);
    for (std::string line; std::getline(netns, line);) {
        const std::string name = line.substr(0, line.find(' '));
        if (const long pid = pid_in_name(name); pid > 0) by_owner[pid].namespaces.push_back(name);
    }
    std::istringstream links(run_tool({"ip", "-o", "link", "show"}, 20).output);
    for (std::string line; std::getline(links, line);) {  // "7: us1234br: <...>", "9: us1234v0@if8: <...>"
        const size_t a = line.find(": ");
        if (a == std::string::npos) continue;
        const std::string name = line.substr(a + 2, line.find_first_of("@:", a + 2) - a - 2);
        if (const long pid = pid_in_name(name); pid > 0) by_owner[pid].links.push_back(name);
    }
    return by_owner;
}

// Ends the processes still inside a namespace (a node's rank or daemon, whose run was killed); how many.
int end_processes_in(const std::string& netns) {
    std::istringstream pids(run_tool({"ip", "netns", "pids", netns}, 20).output);
    std::vector<ProcessId> inside;
    for (long pid; pids >> pid;) inside.push_back({pid_t(pid), process_start_ticks(pid_t(pid))});
    return kill_processes(inside);
}

std::string list(std::vector<std::string> names) {
    std::sort(names.begin(), names.end());
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : " ") + n;
    return s;
}

}  // namespace

std::vector<std::string> end_orphaned_launches() {
    const std::string here = pid_namespace("self");
    std::map<pid_t, std::vector<MarkedProcess>> orphans;  // by their gone owner
    for (const MarkedProcess& p : marked_processes())
        if (p.owner.pid > 0 && p.owner.pid != ::getpid() && !still_running(p.owner) &&
            pid_namespace(std::to_string(p.process.pid)) == here)
            orphans[p.owner.pid].push_back(p);
    std::vector<std::string> lines;
    for (const auto& [owner, processes] : orphans) {
        std::vector<ProcessId> ids;
        std::string names;
        for (const MarkedProcess& p : processes) {
            ids.push_back(p.process);
            names += fmt::format("{}{} ({})", names.empty() ? "" : ", ", p.name, p.process.pid);
        }
        if (const int ended = kill_processes(ids); ended > 0)
            lines.push_back(
                fmt::format("ended {} process(es) a killed launch (pid {}, no longer running) left "
                            "running: {}",
                            ended, owner, names));
    }
    return lines;
}

std::string nodes_folder_template() { return fmt::format("/tmp/{}{}-XXXXXX", kNodesFolderPrefix, ::getpid()); }

void record_nodes_owner(const std::string& folder) {
    std::ofstream(folder + "/owner") << owner_tag(this_process()) << " " << pid_namespace("self") << "\n";
}

std::vector<std::string> remove_stale_nodes() {
    std::vector<std::string> lines;
    for (const auto& [pid, left] : find_leftovers(true)) {
        if (!owner_gone(pid, left)) continue;  // a live run's, beside this one
        int ended = 0;
        for (const std::string& ns : left.namespaces) ended += end_processes_in(ns);
        for (const std::string& ns : left.namespaces) run_tool({"ip", "netns", "del", ns}, 20);
        for (const std::string& link : left.links) run_tool({"ip", "link", "del", link}, 20);
        std::vector<std::string> kept;
        for (const std::string& folder : left.folders) {
            std::error_code ec;
            fs::remove_all(folder, ec);
            if (ec) kept.push_back(folder + " (" + ec.message() + ")");
        }
        std::string line = fmt::format("removed what a killed run (pid {}, no longer running) left:", pid);
        if (ended > 0) line += fmt::format(" {} process(es) still in its nodes, ended;", ended);
        if (!left.namespaces.empty()) line += " its nodes " + list(left.namespaces) + ";";
        if (!left.links.empty()) line += " its links " + list(left.links) + ";";
        if (!left.folders.empty()) line += " its folder " + list(left.folders) + ";";
        line.back() = '.';
        if (!kept.empty()) line += " Could not remove " + list(kept) + ": remove it as its owner (or root).";
        lines.push_back(line);
    }
    return lines;
}

std::vector<std::string> stale_nodes_needing_root() {
    if (::geteuid() == 0) return {};  // root removes them itself when it makes its nodes
    std::map<long, Leftovers> by_owner = find_leftovers(false);
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/run/netns", ec))
        if (const long pid = pid_in_name(e.path().filename().string()); pid > 0)
            by_owner[pid].namespaces.push_back(e.path().filename().string());
    std::vector<std::string> names;
    for (const auto& [pid, left] : by_owner)
        if (!left.namespaces.empty() && owner_gone(pid, left))
            names.insert(names.end(), left.namespaces.begin(), left.namespaces.end());
    if (names.empty()) return {};
    return {
        fmt::format("emulated nodes a killed run as root left in this machine's network remain ({}): only root "
                    "can remove them (the next `sudo ultrascope run --nodes ...` does, or `sudo ip netns del "
                    "NAME`); this run makes its own, apart from them",
                    list(names))};
}

std::vector<std::string> remove_stale_temporary(const fs::path& dir, const std::string& prefix) {
    std::map<long, std::vector<std::string>> by_owner;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (name.rfind(prefix, 0) != 0 || !std::isdigit(uint8_t(name[prefix.size()]))) continue;
        const long pid = std::atol(name.c_str() + prefix.size());
        if (pid != long(::getpid()) && process_start_ticks(pid_t(pid)) == 0) by_owner[pid].push_back(e.path().string());
    }
    std::vector<std::string> lines;
    for (const auto& [pid, paths] : by_owner) {
        for (const std::string& p : paths) fs::remove_all(p, ec);
        lines.push_back(
            fmt::format("removed what a killed run (pid {}, no longer running) left: {}", pid, list(paths)));
    }
    return lines;
}

}  // namespace us::app
