// The pipeline group on NCCL. NCCL matches point-to-point messages by issue order and runs a communicator's
// operations in order on its stream, where the pipeline tags its messages and posts its receives ahead of its sends:
// on one NCCL communicator stage 0's early receive of a gradient would stall its next activation send behind it
// while stage 1 waits for that activation (a deadlock). So each direction between neighbouring stages and each class
// of message (activations, gradients: engine/comm/in_order_p2p.h) gets a channel of its own, a two-rank NCCL
// communicator with its own stream, whose sends and receives meet in order. Every schedule issues each channel's
// messages in one order on both sides: tests/mpi/test_pipeline.cpp checks that on the CPU by matching in order.
// Host scalars and bytes go to the group's host communicator; the group runs no tensor collectives.
#pragma once

#include <memory>

#include "engine/comm/communicator.h"

namespace us {

class CudaBackend;

// Collective over `host`'s group (it exchanges the channels' NCCL ids).
std::unique_ptr<Communicator> make_nccl_pipe_communicator(std::unique_ptr<Communicator> host, CudaBackend& backend);

}  // namespace us
