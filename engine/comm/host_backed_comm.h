// The part that NCCL and the host-staging communicator share: a communicator for device buffers built on the
// group's host communicator (MPI), which keeps the group's identity, its barrier and the host-side scalars and
// bytes. Subclasses implement the tensor operations.
#pragma once

#include <memory>

#include "engine/comm/communicator.h"

namespace us {

class HostBackedCommunicator : public Communicator {
public:
    explicit HostBackedCommunicator(std::unique_ptr<Communicator> host) : m_host(std::move(host)) {}

    int rank() const override { return m_host->rank(); }
    int size() const override { return m_host->size(); }
    GroupKind kind() const override { return m_host->kind(); }
    int world_rank_of(int r) const override { return m_host->world_rank_of(r); }

    CommHandle ibarrier() override { return m_host->ibarrier(); }
    double all_reduce_sum(double value) override { return m_host->all_reduce_sum(value); }
    double all_reduce_max(double value) override { return m_host->all_reduce_max(value); }
    void all_gather_bytes(const void* send, size_t bytes_per_rank, void* recv) override {
        m_host->all_gather_bytes(send, bytes_per_rank, recv);
    }
    void all_to_all_bytes(const void* send, size_t bytes_per_rank, void* recv) override {
        m_host->all_to_all_bytes(send, bytes_per_rank, recv);
    }

protected:
    Communicator& host_comm() { return *m_host; }
    const Communicator& host_comm() const { return *m_host; }

private:
    std::unique_ptr<Communicator> m_host;
};

}  // namespace us
