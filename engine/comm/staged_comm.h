// A Communicator for device buffers over a host one (MPI): each operation copies its device data to host memory,
// runs there, and copies results back once the host operation completes. It is the fallback where NCCL cannot
// run (ranks sharing one GPU, which NCCL refuses) and the path for pipeline transfers on GPUs, whose tags NCCL
// cannot match (docs/gpu.md). The host communicator records the spans; the copies are the price of the fallback.
// With the CPU backend the copies are memcpys, which is how the tests exercise it.
#pragma once

#include <memory>

#include "engine/backend/backend.h"
#include "engine/comm/communicator.h"

namespace us {

class StagedCommunicator final : public Communicator {
public:
    StagedCommunicator(std::unique_ptr<Communicator> host, Backend& device);

    int rank() const override { return m_host->rank(); }
    int size() const override { return m_host->size(); }
    GroupKind kind() const override { return m_host->kind(); }
    int world_rank_of(int r) const override { return m_host->world_rank_of(r); }

    CommHandle iall_reduce(Tensor buf) override;
    CommHandle ireduce_scatter(Tensor send, Tensor recv, const std::vector<int>& counts,
                               const std::vector<int>& displs) override;
    CommHandle iall_gather(Tensor buf, const std::vector<int>& counts, const std::vector<int>& displs) override;
    CommHandle ibroadcast(Tensor buf, int root) override;
    CommHandle isend(Tensor buf, int peer, int tag) override;
    CommHandle irecv(Tensor buf, int peer, int tag) override;
    CommHandle iall_to_all(Tensor send, Tensor recv) override;
    CommHandle ibarrier() override { return m_host->ibarrier(); }

    double all_reduce_sum(double value) override { return m_host->all_reduce_sum(value); }
    double all_reduce_max(double value) override { return m_host->all_reduce_max(value); }
    void all_gather_bytes(const void* send, size_t bytes_per_rank, void* recv) override {
        m_host->all_gather_bytes(send, bytes_per_rank, recv);
    }

private:
    std::unique_ptr<Communicator> m_host;
    Backend& m_device;
};

}  // namespace us
