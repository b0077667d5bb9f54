// Running a system tool (ip, tc) to its end with its output captured, as the emulated nodes' set-up, teardown and
// clean-up do, each call within a time limit: a tool that hangs (a machine out of memory) is killed and reported, so
// the set-up never waits for ever.
#pragma once

#include <string>
#include <vector>

namespace us::app {

struct ToolResult {
    int code = -1;       // the exit code; 127: could not be started; 124: killed at the time limit
    std::string output;  // stdout and stderr
};

ToolResult run_tool(const std::vector<std::string>& argv, double limit_seconds = 60);
std::string joined(const std::vector<std::string>& argv);

}  // namespace us::app
