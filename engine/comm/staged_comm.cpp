#include "engine/comm/staged_comm.h"

#include <vector>

#include "common/core/check.h"

namespace us {

namespace {

// Host memory for one staged operation, aligned for any element type.
struct HostBuffer {
    std::vector<double> storage;
    Tensor as(DType t, int64_t numel) {
        storage.resize(size_t((numel * int64_t(dtype_size(t)) + 7) / 8));
        return Tensor::of(storage.data(), t, numel);
    }
};

// Completes the host operation, then copies the results back to the device (once).
class StagedRequest final : public CommRequest {
public:
    StagedRequest(CommHandle host, Backend& device, std::shared_ptr<HostBuffer> buffer, Tensor from, Tensor to)
        : m_host(std::move(host)), m_device(device), m_buffer(std::move(buffer)), m_from(from), m_to(to) {}
    bool test() override {
        if (m_done) return true;
        if (!m_host->test()) return false;
        finish();
        return true;
    }
    void wait() override {
        if (m_done) return;
        m_host->wait();
        finish();
    }

private:
    void finish() {
        if (!m_to.empty()) m_device.upload(m_to, m_from.data);
        m_buffer.reset();
        m_done = true;
    }
    CommHandle m_host;
    Backend& m_device;
    std::shared_ptr<HostBuffer> m_buffer;
    Tensor m_from, m_to;  // host result -> device destination (empty: nothing comes back)
    bool m_done = false;
};

}  // namespace

StagedCommunicator::StagedCommunicator(std::unique_ptr<Communicator> host, Backend& device)
    : HostBackedCommunicator(std::move(host)), m_device(device) {}

CommHandle StagedCommunicator::iall_reduce(Tensor buf, ReduceOp op) {
    auto staging = std::make_shared<HostBuffer>();
    Tensor host = staging->as(buf.dtype, buf.numel);
    m_device.download(host.data, buf);
    return std::make_shared<StagedRequest>(host_comm().iall_reduce(host, op), m_device, staging, host, buf);
}

CommHandle StagedCommunicator::ireduce_scatter(Tensor send, Tensor recv, const std::vector<int>& counts,
                                               const std::vector<int>& displs) {
    auto staging = std::make_shared<HostBuffer>();
    // one allocation: the whole send range, then this rank's piece
    Tensor both = staging->as(send.dtype, send.numel + recv.numel);
    Tensor host_send = both.slice(0, send.numel), host_recv = both.slice(send.numel, recv.numel);
    m_device.download(host_send.data, send);
    return std::make_shared<StagedRequest>(host_comm().ireduce_scatter(host_send, host_recv, counts, displs), m_device,
                                           staging, host_recv, recv);
}

CommHandle StagedCommunicator::iall_gather(Tensor buf, const std::vector<int>& counts, const std::vector<int>& displs) {
    auto staging = std::make_shared<HostBuffer>();
    Tensor host = staging->as(buf.dtype, buf.numel);
    m_device.download(host.data, buf);
    return std::make_shared<StagedRequest>(host_comm().iall_gather(host, counts, displs), m_device, staging, host, buf);
}

CommHandle StagedCommunicator::ibroadcast(Tensor buf, int root) {
    auto staging = std::make_shared<HostBuffer>();
    Tensor host = staging->as(buf.dtype, buf.numel);
    if (rank() == root) m_device.download(host.data, buf);
    return std::make_shared<StagedRequest>(host_comm().ibroadcast(host, root), m_device, staging, host,
                                           rank() == root ? Tensor{} : buf);
}

CommHandle StagedCommunicator::isend(Tensor buf, int peer, int tag) {
    auto staging = std::make_shared<HostBuffer>();
    Tensor host = staging->as(buf.dtype, buf.numel);
    m_device.download(host.data, buf);
    return std::make_shared<StagedRequest>(host_comm().isend(host, peer, tag), m_device, staging, host, Tensor{});
}

CommHandle StagedCommunicator::irecv(Tensor buf, int peer, int tag) {
    auto staging = std::make_shared<HostBuffer>();
    Tensor host = staging->as(buf.dtype, buf.numel);
    return std::make_shared<StagedRequest>(host_comm().irecv(host, peer, tag), m_device, staging, host, buf);
}

CommHandle StagedCommunicator::iall_to_allv(Tensor send, const std::vector<int>& send_counts, Tensor recv,
                                            const std::vector<int>& recv_counts) {
    auto staging = std::make_shared<HostBuffer>();
    Tensor both = staging->as(send.dtype, send.numel + recv.numel);
    Tensor host_send = both.slice(0, send.numel), host_recv = both.slice(send.numel, recv.numel);
    m_device.download(host_send.data, send);
    return std::make_shared<StagedRequest>(host_comm().iall_to_allv(host_send, send_counts, host_recv, recv_counts),
                                           m_device, staging, host_recv, recv);
}

CommHandle StagedCommunicator::iall_to_all(Tensor send, Tensor recv) {
    auto staging = std::make_shared<HostBuffer>();
    Tensor both = staging->as(send.dtype, send.numel + recv.numel);
    Tensor host_send = both.slice(0, send.numel), host_recv = both.slice(send.numel, recv.numel);
    m_device.download(host_send.data, send);
    return std::make_shared<StagedRequest>(host_comm().iall_to_all(host_send, host_recv), m_device, staging, host_recv,
                                           recv);
}

}  // namespace us
