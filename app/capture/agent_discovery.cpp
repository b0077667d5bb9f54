// The local agent's discovery file (agent_discovery.h).
#include "app/capture/agent_discovery.h"

#include <fmt/core.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>

#include "common/core/check.h"

namespace us::app {

std::string agent_discovery_path(const std::string& socket_dir) {
    const std::string dir = fmt::format("/tmp/ultrascope-{}", ::getuid());
    if (socket_dir.empty()) {
        // The abstract name is per network namespace: so is its agent (one per emulated node shares this /tmp).
        struct stat net {};
        if (::stat("/proc/self/ns/net", &net) != 0) return dir + "/agent.json";
        return fmt::format("{}/agent-net{}.json", dir, uint64_t(net.st_ino));
    }
    return fmt::format("{}/agent-{:016x}.json", dir, std::hash<std::string>{}(socket_dir));
}

void write_agent_discovery(const std::string& socket_dir, const LocalAgent& agent) {
    const std::string path = agent_discovery_path(socket_dir);
    const std::string dir = path.substr(0, path.rfind('/'));
    ::mkdir(dir.c_str(), 0700);
    struct stat st {};
    US_CHECK_INPUT(::lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::getuid(),
                   "{} is not a directory of this user: remove it and start the agent again", dir);
    ::chmod(dir.c_str(), 0700);
    const std::string temp = path + ".tmp";
    {
        std::ofstream out(temp, std::ios::trunc);
        out << nlohmann::json{{"pid", agent.pid}, {"port", agent.port}, {"host", agent.host}, {"token", agent.token}}
                   .dump()
            << "\n";
        US_CHECK_INPUT(out.good(), "cannot write {}", temp);
    }
    ::chmod(temp.c_str(), 0600);
    US_CHECK_INPUT(::rename(temp.c_str(), path.c_str()) == 0, "cannot write {}", path);
}

void remove_agent_discovery(const std::string& socket_dir) { ::unlink(agent_discovery_path(socket_dir).c_str()); }

std::optional<LocalAgent> find_local_agent(const std::string& socket_dir) {
    std::ifstream in(agent_discovery_path(socket_dir));
    if (!in) return std::nullopt;
    const nlohmann::json j = nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), {}), nullptr, false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    LocalAgent agent;
    agent.pid = j.value("pid", 0);
    agent.port = j.value("port", 0);
    agent.host = j.value("host", std::string("127.0.0.1"));
    agent.token = j.value("token", std::string());
    if (agent.pid <= 0 || agent.port <= 0 || ::kill(agent.pid, 0) != 0) return std::nullopt;
    if (agent.host == "0.0.0.0") agent.host = "127.0.0.1";
    return agent;
}

}  // namespace us::app
