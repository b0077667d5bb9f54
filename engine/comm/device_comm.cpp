#include "engine/comm/device_comm.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/comm/staged_comm.h"

#ifdef US_HAVE_NCCL
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/comm/nccl_comm.h"
#include "engine/comm/nccl_pipe_comm.h"
#endif

namespace us {

DeviceComm make_device_communicator(std::unique_ptr<Communicator> host, Backend& backend, DeviceTraffic traffic) {
    DeviceComm out;
    if (!backend.is_async() || host->size() == 1) {  // host memory, or nothing to exchange
        out.path = host->size() == 1 ? "local" : "mpi";
        out.comm = std::move(host);
        return out;
    }
    std::string why = "this build has no NCCL";
#ifdef US_HAVE_NCCL
    if (auto* cuda = dynamic_cast<CudaBackend*>(&backend)) {
        // Every rank of the group takes the same branch: the check is collective and its answer is shared.
        if (group_has_distinct_devices(*host, cuda->device(), &why)) {
            const bool tagged = traffic == DeviceTraffic::tagged;
            out.path = tagged ? "nccl (a channel per direction and message class)" : "nccl";
            out.comm = tagged ? make_nccl_pipe_communicator(std::move(host), *cuda)
                              : make_nccl_communicator(std::move(host), *cuda);
            return out;
        }
    }
#endif
    out.path = "mpi with host staging (" + why + ")";
    out.comm = std::make_unique<StagedCommunicator>(std::move(host), backend);
    return out;
}

void give_ranks_their_own_nccl_hosts(Communicator& world) {
    char host[64] = {};
    gethostname(host, sizeof host - 1);
    std::vector<char> all(sizeof host * size_t(world.size()));
    world.all_gather_bytes(host, sizeof host, all.data());
    bool one_host = true;
    for (int r = 0; r < world.size(); ++r)
        one_host = one_host && std::strncmp(&all[size_t(r) * sizeof host], host, sizeof host) == 0;
    const std::string id = fmt::format("{}-rank{}", host, world.rank());
    setenv("NCCL_HOSTID", id.c_str(), 0);
    if (one_host) setenv("NCCL_SOCKET_IFNAME", "lo", 0);
}

}  // namespace us
