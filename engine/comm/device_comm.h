// Communicators for the memory a backend computes in. On the CPU the host communicator (MPI) already is one. On a
// GPU a group of ranks that each drive their own GPU gets NCCL; ranks that share a GPU (NCCL refuses them), a build
// without NCCL, and groups whose messages need tags (pipeline transfers) get MPI with host staging. The choice is
// described for the run's metadata, so the trace says which path the bytes took.
#pragma once

#include <memory>
#include <string>

#include "engine/backend/backend.h"
#include "engine/comm/communicator.h"

namespace us {

enum class DeviceTraffic {
    collectives,  // all-reduce, reduce-scatter, all-gather issued in the same order everywhere: NCCL when it can
    tagged,       // point-to-point messages matched by tag (the pipeline): host staging
};

struct DeviceComm {
    std::unique_ptr<Communicator> comm;
    std::string path;  // "mpi", "nccl", "mpi with host staging (<why>)"
};

DeviceComm make_device_communicator(std::unique_ptr<Communicator> host, Backend& backend, DeviceTraffic traffic);

}  // namespace us
