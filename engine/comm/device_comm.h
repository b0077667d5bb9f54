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
    tagged,       // point-to-point messages matched by tag (the pipeline): NCCL channels per direction and class
};

struct DeviceComm {
    std::unique_ptr<Communicator> comm;
    std::string path;  // "mpi", "nccl", "mpi with host staging (<why>)"
};

DeviceComm make_device_communicator(std::unique_ptr<Communicator> host, Backend& backend, DeviceTraffic traffic);

// --nccl-shared-gpu: NCCL refuses two ranks on one GPU of one host, and tells hosts apart by NCCL_HOSTID. Each rank
// takes its own (host name and world rank; a user's NCCL_HOSTID is kept), so ranks that share a GPU are separate
// hosts to NCCL and talk through its socket transport; when the whole world runs on this host and no interface is
// named, over loopback (NCCL_SOCKET_IFNAME=lo). Collective over `world`; before any communicator is made.
void give_ranks_their_own_nccl_hosts(Communicator& world);

}  // namespace us
