// The standing nodes' state file and lock (nodes_state.h).
#include "app/launch/nodes_state.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/launch/stale_runs.h"
#include "common/core/check.h"

namespace us::app {

namespace fs = std::filesystem;

std::vector<std::string> NodesState::agents() const {
    std::vector<std::string> out;
    for (const StandingNode& n : nodes) out.push_back(fmt::format("{}:{}", n.address, n.agent_port));
    return out;
}

std::string NodesState::addresses() const {
    std::string s;
    for (const StandingNode& n : nodes) s += (s.empty() ? "" : ",") + n.address;
    return s;
}

std::string nodes_run_dir() {
    const char* dir = std::getenv("ULTRASCOPE_NODES_DIR");
    return dir && *dir ? std::string(dir) : std::string("/run/ultrascope");
}
std::string nodes_state_path() { return nodes_run_dir() + "/nodes.json"; }
std::string nodes_lock_path() { return nodes_run_dir() + "/nodes.lock"; }

void write_nodes_state(const NodesState& s) {
    nlohmann::json nodes = nlohmann::json::array();
    for (const StandingNode& n : s.nodes)
        nodes.push_back(
            {{"name", n.name}, {"address", n.address}, {"interface", n.interface}, {"agent_port", n.agent_port}});
    const nlohmann::json j = {{"holder", owner_tag(s.holder)},
                              {"token", s.token},
                              {"bridge_address", s.bridge_address},
                              {"subnet", s.subnet},
                              {"folder", s.folder},
                              {"description", s.description},
                              {"inter_node_gbps", s.inter_node_gbps},
                              {"nodes", nodes}};
    const std::string path = nodes_state_path(), temp = path + ".tmp";
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    US_CHECK_INPUT(fd >= 0, "cannot write {}: {}", temp, std::strerror(errno));
    const std::string text = j.dump(2) + "\n";
    const bool written = ::write(fd, text.data(), text.size()) == ssize_t(text.size());
    ::close(fd);
    US_CHECK_INPUT(written && ::rename(temp.c_str(), path.c_str()) == 0, "cannot write {}: {}", path,
                   std::strerror(errno));
}

std::optional<NodesState> read_nodes_state() {
    std::ifstream in(nodes_state_path());
    if (!in) return std::nullopt;
    std::stringstream text;
    text << in.rdbuf();
    try {
        const nlohmann::json j = nlohmann::json::parse(text.str());
        NodesState s;
        s.holder = parse_owner_tag(j.at("holder").get<std::string>());
        s.token = j.at("token").get<std::string>();
        s.bridge_address = j.at("bridge_address").get<std::string>();
        s.subnet = j.at("subnet").get<std::string>();
        s.folder = j.at("folder").get<std::string>();
        s.description = j.value("description", std::string());
        s.inter_node_gbps = j.value("inter_node_gbps", 0.0);
        for (const nlohmann::json& n : j.at("nodes"))
            s.nodes.push_back({n.at("name").get<std::string>(), n.at("address").get<std::string>(),
                               n.at("interface").get<std::string>(), n.at("agent_port").get<int>()});
        return s;
    } catch (const nlohmann::json::exception& e) {
        fail_user("{} is damaged ({}): `ultrascope nodes down` removes the nodes it named", nodes_state_path(),
                  e.what());
    }
}

bool nodes_holder_running() {
    const int fd = ::open(nodes_lock_path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;  // no lock file: no holder ever ran here
    const bool free = ::flock(fd, LOCK_SH | LOCK_NB) == 0;
    ::close(fd);
    return !free;
}

void remove_nodes_run_files() {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(nodes_run_dir(), ec)) {
        const std::string name = e.path().filename().string();
        if (name == "nodes.log" || name == "nodes.json" ||
            (name.rfind("agent-", 0) == 0 && e.path().extension() == ".log"))
            fs::remove(e.path(), ec);
    }
    fs::remove(nodes_lock_path(), ec);
    fs::remove(nodes_run_dir(), ec);  // only when empty
}

std::vector<std::string> remove_dead_holder_leftovers() {
    const bool state_file = fs::exists(nodes_state_path());
    if (!state_file || nodes_holder_running()) return {};
    std::vector<std::string> lines;
    if (::geteuid() == 0) lines = remove_stale_nodes();  // the holder's nodes carry its pid (stale_runs.h)
    remove_nodes_run_files();
    lines.push_back(fmt::format("the holder of the emulated nodes no longer ran: removed its state file and logs in {}",
                                nodes_run_dir()));
    return lines;
}

NodesState standing_nodes() {
    const std::vector<std::string> cleaned = remove_dead_holder_leftovers();
    std::string said;
    for (const std::string& line : cleaned) said += " (" + line + ")";
    const std::optional<NodesState> state = nodes_holder_running() ? read_nodes_state() : std::nullopt;
    US_CHECK_INPUT(state.has_value(), "no emulated nodes are up{}: start them with `sudo ultrascope nodes up N`", said);
    return *state;
}

}  // namespace us::app
