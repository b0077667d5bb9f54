// The communicator of a group of one rank: all-reduce and gathers leave the data as it is, reduce-scatter copies
// the rank's piece, point-to-point has no peer.
#include <cstring>

#include "engine/comm/communicator.h"
#include "common/core/check.h"

namespace us {

namespace {

class DoneRequest final : public CommRequest {
public:
    bool test() override { return true; }
    void wait() override {}
};

class LocalCommunicator final : public Communicator {
public:
    explicit LocalCommunicator(GroupKind kind) : m_kind(kind) {}
    int rank() const override { return 0; }
    int size() const override { return 1; }
    GroupKind kind() const override { return m_kind; }
    int world_rank_of(int r) const override { return r; }
    CommHandle iall_reduce(Tensor, ReduceOp) override { return completed_handle(); }
    CommHandle ireduce_scatter(Tensor send, Tensor recv, const std::vector<int>& counts,
                               const std::vector<int>& displs) override {
        if (send.data != recv.data)
            std::memmove(recv.data, send.slice(displs[0], counts[0]).data, size_t(counts[0]) * dtype_size(send.dtype));
        return completed_handle();
    }
    CommHandle iall_gather(Tensor, const std::vector<int>&, const std::vector<int>&) override {
        return completed_handle();
    }
    CommHandle ibroadcast(Tensor, int) override { return completed_handle(); }
    CommHandle isend(Tensor, int peer, int) override { US_ASSERT(false, "send to {} in a group of one", peer); }
    CommHandle irecv(Tensor, int peer, int) override { US_ASSERT(false, "recv from {} in a group of one", peer); }
    CommHandle iall_to_all(Tensor send, Tensor recv) override {
        if (send.data != recv.data) std::memcpy(recv.data, send.data, send.bytes());
        return completed_handle();
    }
    CommHandle iall_to_allv(Tensor send, const std::vector<int>& send_counts, Tensor recv,
                            const std::vector<int>&) override {
        if (send.data != recv.data) std::memcpy(recv.data, send.data, size_t(send_counts[0]) * dtype_size(send.dtype));
        return completed_handle();
    }
    CommHandle ibarrier() override { return completed_handle(); }
    double all_reduce_sum(double v) override { return v; }
    double all_reduce_max(double v) override { return v; }
    void all_gather_bytes(const void* send, size_t bytes, void* recv) override { std::memcpy(recv, send, bytes); }
    void all_to_all_bytes(const void* send, size_t bytes, void* recv) override { std::memcpy(recv, send, bytes); }

private:
    GroupKind m_kind;
};

}  // namespace

CommHandle completed_handle() {
    static const CommHandle done = std::make_shared<DoneRequest>();
    return done;
}

std::unique_ptr<Communicator> make_local_communicator(GroupKind kind) {
    return std::make_unique<LocalCommunicator>(kind);
}

}  // namespace us
