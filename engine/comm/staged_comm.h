// A Communicator for device buffers over a host one (MPI): each operation copies its device data to host memory,
// runs there, and copies results back once the host operation completes. It is the fallback where NCCL cannot
// run (ranks sharing one GPU, which NCCL refuses; builds without NCCL; docs/gpu.md). The host communicator records
// the spans; the copies are the price of the fallback.
// With the CPU backend the copies are memcpys, which is how the tests exercise it.
#pragma once

#include <memory>

#include "engine/backend/backend.h"
#include "engine/comm/host_backed_comm.h"

namespace us {

class StagedCommunicator final : public HostBackedCommunicator {
public:
    StagedCommunicator(std::unique_ptr<Communicator> host, Backend& device);

    CommHandle iall_reduce(Tensor buf, ReduceOp op) override;
    CommHandle ireduce_scatter(Tensor send, Tensor recv, const std::vector<int>& counts,
                               const std::vector<int>& displs) override;
    CommHandle iall_gather(Tensor buf, const std::vector<int>& counts, const std::vector<int>& displs) override;
    CommHandle ibroadcast(Tensor buf, int root) override;
    CommHandle isend(Tensor buf, int peer, int tag) override;
    CommHandle irecv(Tensor buf, int peer, int tag) override;
    CommHandle iall_to_all(Tensor send, Tensor recv) override;
    CommHandle iall_to_allv(Tensor send, const std::vector<int>& send_counts, Tensor recv,
                            const std::vector<int>& recv_counts) override;

private:
    Backend& m_device;
};

}  // namespace us
