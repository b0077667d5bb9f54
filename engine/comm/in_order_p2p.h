// Point-to-point messages matched by issue order, NCCL's rule, instead of by tag (MPI's). NCCL has no tags: between
// two ranks, the k-th send meets the k-th receive. A caller that tags its messages can still use it when, for each
// direction and each class of message, both sides issue them in the same order. The class is the tag's low bit
// (p2p_tag): one ordered channel per (direction, class), so the pipeline's activations (forward) and gradients
// (backward) never wait behind one another.
//
// match_p2p_by_order wraps a tag-matching communicator (MPI) so that it matches by order as NCCL does: every message
// of a channel goes with the channel's one tag, and MPI's non-overtaking rule then pairs them in issue order. A
// caller that relies on tags where the orders differ gets another message's bytes, as it would on NCCL, so the
// pipeline's schedules are checked against one rank this way on the CPU (tests/mpi/test_pipeline.cpp) before NCCL
// carries them on a GPU.
#pragma once

#include <memory>

#include "engine/comm/communicator.h"

namespace us {

constexpr int kP2PClasses = 2;

// A tag whose class is `cls` (0 or 1) and whose identity within the class is `id`.
constexpr int p2p_tag(int cls, int id) { return id * kP2PClasses + cls; }
constexpr int p2p_class(int tag) { return tag % kP2PClasses; }

std::unique_ptr<Communicator> match_p2p_by_order(std::unique_ptr<Communicator> tagged);

}  // namespace us
