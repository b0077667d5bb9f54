// How `ultrascope capture` finds the agent already running on its own node: the agent writes its port and token
// to a file only its user can read (/tmp/ultrascope-UID/agent*.json, one per socket directory, or per network namespace
// for the abstract name), and removes it when it stops. A capture that finds the "dynolog" name taken reads it; a file
// whose agent died is ignored.
#pragma once

#include <optional>
#include <string>

namespace us::app {

struct LocalAgent {
    int pid = 0;
    int port = 0;
    std::string host = "127.0.0.1";
    std::string token;
};

std::string agent_discovery_path(const std::string& socket_dir);
void write_agent_discovery(const std::string& socket_dir, const LocalAgent& agent);  // UserError when it cannot
void remove_agent_discovery(const std::string& socket_dir);
std::optional<LocalAgent> find_local_agent(const std::string& socket_dir);  // alive, or nullopt

}  // namespace us::app
