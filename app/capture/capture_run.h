// `ultrascope capture`: N optimizer steps of a running PyTorch job, from every rank, written as a folder of rank
// files. With no agent named it owns this node's Kineto daemon endpoint for the capture's duration (or asks the
// agent already running here); with --agents it asks each node's agent and gathers what they stream back.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace us::app {

struct CaptureOptions {
    int steps = 3;
    int roundup = 100;
    double timeout_s = 120;
    std::string out;                  // DIR
    std::vector<std::string> agents;  // HOST:PORT; empty = this node
    std::string job;                  // "" = the only job polling
    std::string token;                // the agents' token (else ULTRASCOPE_AGENT_TOKEN, else the local agent's)
    bool list = false;                // only list the jobs polling
};

// Prints progress to `log` and what it wrote to `out`; returns the exit code. UserError on bad input or failure
// (nothing is written then).
int run_capture(const CaptureOptions& options, std::FILE* out, std::FILE* log);

}  // namespace us::app
