// NCCL for device buffers: one ncclComm per process group, bootstrapped through the group's host communicator
// (rank 0's unique id travels by MPI). Collectives run on the backend's comm stream after an event from the
// compute stream (so they see the gradients backward has launched), and a handle's wait() makes the compute
// stream wait for them -- the host never blocks, which is what lets bucket all-reduces overlap the backward. Spans
// come from host callbacks on the comm stream placed around each operation: they bracket the GPU's execution of it
// (CUPTI has the kernels themselves). Uneven pieces (ZeRO's last shard) use grouped ncclReduce / ncclBroadcast.
// Host-memory operations (scalars, bytes) go to the host communicator.
#pragma once

#include <memory>
#include <string>

#include "engine/comm/communicator.h"

namespace us {

class CudaBackend;

// "host:pci-bus-id" of the device, to tell ranks that share a GPU (NCCL refuses to run two ranks on one).
std::string cuda_device_identity(int device);

// Whether every rank of `group` drives a GPU of its own; *why names the sharing otherwise.
bool group_has_distinct_devices(Communicator& group, int device, std::string* why);

std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> host, CudaBackend& backend);

}  // namespace us
