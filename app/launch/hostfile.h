// Multi-host launches: the hosts of an Open MPI hostfile ("host [slots=N]" per line, # comments), and whether a
// host is this machine (then ranks there reach the listener on loopback).
#pragma once

#include <string>
#include <vector>

namespace us::app {

struct HostEntry {
    std::string name;
    int slots = 1;  // ranks it takes (slots=N; 1 when not given)
};

// UserError naming the file and line when it cannot be read or a line is not "HOST [slots=N] [max_slots=N]".
std::vector<HostEntry> read_hostfile(const std::string& path);
// localhost, 127.x.y.z, ::1, or this machine's host name.
bool is_local_host(const std::string& name);

}  // namespace us::app
