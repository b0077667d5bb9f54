// The commands that attach to running PyTorch jobs (docs/attach-pytorch.md): a node's Kineto daemon, the capture,
// and emulated nodes that stay up for a job to run on. Apart from commands.h so that the other commands do not depend
// on them.
#pragma once

namespace us::app {

int agent_command(int argc, char** argv);    // ultrascope agent [--port P] [--listen ADDR]: a node's Kineto daemon
int capture_command(int argc, char** argv);  // ultrascope capture --steps N --out DIR: a running PyTorch job
int nodes_command(int argc, char** argv);    // ultrascope nodes up N | exec K -- CMD | down | status

}  // namespace us::app
