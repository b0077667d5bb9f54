// Matching by issue order on a tag-matching communicator (in_order_p2p.h).
#include "engine/comm/in_order_p2p.h"

namespace us {
namespace {

// Every message of a channel carries the channel's tag; the rest of the group's operations pass through.
class InOrderP2PCommunicator final : public Communicator {
public:
    explicit InOrderP2PCommunicator(std::unique_ptr<Communicator> inner) : m_inner(std::move(inner)) {}

    int rank() const override { return m_inner->rank(); }
    int size() const override { return m_inner->size(); }
    GroupKind kind() const override { return m_inner->kind(); }
    int world_rank_of(int r) const override { return m_inner->world_rank_of(r); }
    const char* library() const override { return m_inner->library(); }

    CommHandle isend(Tensor buf, int peer, int tag) override { return m_inner->isend(buf, peer, channel(tag)); }
    CommHandle irecv(Tensor buf, int peer, int tag) override { return m_inner->irecv(buf, peer, channel(tag)); }
    std::pair<CommHandle, CommHandle> isend_recv(Tensor send, int to, Tensor recv, int from, int tag) override {
        return m_inner->isend_recv(send, to, recv, from, channel(tag));
    }

    CommHandle iall_reduce(Tensor buf, ReduceOp op) override { return m_inner->iall_reduce(buf, op); }
    CommHandle ireduce_scatter(Tensor send, Tensor recv, const std::vector<int>& counts,
                               const std::vector<int>& displs) override {
        return m_inner->ireduce_scatter(send, recv, counts, displs);
    }
    CommHandle iall_gather(Tensor buf, const std::vector<int>& counts, const std::vector<int>& displs) override {
        return m_inner->iall_gather(buf, counts, displs);
    }
    CommHandle ibroadcast(Tensor buf, int root) override { return m_inner->ibroadcast(buf, root); }
    CommHandle iall_to_all(Tensor send, Tensor recv) override { return m_inner->iall_to_all(send, recv); }
    CommHandle iall_to_allv(Tensor send, const std::vector<int>& send_counts, Tensor recv,
                            const std::vector<int>& recv_counts) override {
        return m_inner->iall_to_allv(send, send_counts, recv, recv_counts);
    }
    void all_reduce(Tensor buf, ReduceOp op) override { m_inner->all_reduce(buf, op); }
    void reduce_scatter(Tensor send, Tensor recv, const std::vector<int>& counts,
                        const std::vector<int>& displs) override {
        m_inner->reduce_scatter(send, recv, counts, displs);
    }
    void all_gather(Tensor buf, const std::vector<int>& counts, const std::vector<int>& displs) override {
        m_inner->all_gather(buf, counts, displs);
    }
    CommHandle ibarrier() override { return m_inner->ibarrier(); }
    double all_reduce_sum(double value) override { return m_inner->all_reduce_sum(value); }
    double all_reduce_max(double value) override { return m_inner->all_reduce_max(value); }
    void all_gather_bytes(const void* send, size_t bytes_per_rank, void* recv) override {
        m_inner->all_gather_bytes(send, bytes_per_rank, recv);
    }
    void all_to_all_bytes(const void* send, size_t bytes_per_rank, void* recv) override {
        m_inner->all_to_all_bytes(send, bytes_per_rank, recv);
    }

private:
    // Far from the small tags other callers use on the group.
    static int channel(int tag) { return 30000 + p2p_class(tag); }
    std::unique_ptr<Communicator> m_inner;
};

}  // namespace

std::unique_ptr<Communicator> match_p2p_by_order(std::unique_ptr<Communicator> tagged) {
    return std::make_unique<InOrderP2PCommunicator>(std::move(tagged));
}

}  // namespace us
