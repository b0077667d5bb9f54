// Matching by issue order on a tag-matching communicator (in_order_p2p.h).
#include "engine/comm/in_order_p2p.h"

#include "engine/comm/host_backed_comm.h"

namespace us {
namespace {

// Every message of a channel carries the channel's tag; the rest of the group's operations pass through (the
// group's identity, barrier, scalars and bytes through HostBackedCommunicator).
class InOrderP2PCommunicator final : public HostBackedCommunicator {
public:
    explicit InOrderP2PCommunicator(std::unique_ptr<Communicator> inner) : HostBackedCommunicator(std::move(inner)) {}
    const char* library() const override { return host_comm().library(); }

    CommHandle isend(Tensor buf, int peer, int tag) override { return inner().isend(buf, peer, channel(tag)); }
    CommHandle irecv(Tensor buf, int peer, int tag) override { return inner().irecv(buf, peer, channel(tag)); }
    std::pair<CommHandle, CommHandle> isend_recv(Tensor send, int to, Tensor recv, int from, int tag) override {
        return inner().isend_recv(send, to, recv, from, channel(tag));
    }

    CommHandle iall_reduce(Tensor buf, ReduceOp op) override { return inner().iall_reduce(buf, op); }
    CommHandle ireduce_scatter(Tensor send, Tensor recv, const std::vector<int>& counts,
                               const std::vector<int>& displs) override {
        return inner().ireduce_scatter(send, recv, counts, displs);
    }
    CommHandle iall_gather(Tensor buf, const std::vector<int>& counts, const std::vector<int>& displs) override {
        return inner().iall_gather(buf, counts, displs);
    }
    CommHandle ibroadcast(Tensor buf, int root) override { return inner().ibroadcast(buf, root); }
    CommHandle iall_to_all(Tensor send, Tensor recv) override { return inner().iall_to_all(send, recv); }
    CommHandle iall_to_allv(Tensor send, const std::vector<int>& send_counts, Tensor recv,
                            const std::vector<int>& recv_counts) override {
        return inner().iall_to_allv(send, send_counts, recv, recv_counts);
    }
    void all_reduce(Tensor buf, ReduceOp op) override { inner().all_reduce(buf, op); }
    void reduce_scatter(Tensor send, Tensor recv, const std::vector<int>& counts,
                        const std::vector<int>& displs) override {
        inner().reduce_scatter(send, recv, counts, displs);
    }
    void all_gather(Tensor buf, const std::vector<int>& counts, const std::vector<int>& displs) override {
        inner().all_gather(buf, counts, displs);
    }

private:
    // Far from the small tags other callers use on the group.
    static int channel(int tag) { return 30000 + p2p_class(tag); }
    Communicator& inner() { return host_comm(); }
};

}  // namespace

std::unique_ptr<Communicator> match_p2p_by_order(std::unique_ptr<Communicator> tagged) {
    return std::make_unique<InOrderP2PCommunicator>(std::move(tagged));
}

}  // namespace us
