// The pipeline group's NCCL channels (nccl_pipe_comm.h).
#include "engine/comm/nccl_pipe_comm.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/comm/host_backed_comm.h"
#include "engine/comm/in_order_p2p.h"
#include "engine/comm/nccl_launch.h"

namespace us {
namespace {

class NcclPipeCommunicator final : public HostBackedCommunicator {
public:
    NcclPipeCommunicator(std::unique_ptr<Communicator> host, CudaBackend& backend)
        : HostBackedCommunicator(std::move(host)), m_compute(backend.compute_stream()) {
        open_channels();
    }
    ~NcclPipeCommunicator() override {
        for (Channel& c : m_channels) {
            cudaStreamSynchronize(c.stream);
            ncclCommDestroy(c.comm);
            cudaStreamDestroy(c.stream);
        }
    }
    const char* library() const override { return "nccl"; }

    CommHandle isend(Tensor buf, int peer, int tag) override {
        const Channel& c = channel(rank(), peer, p2p_class(tag));
        return nccl::launch(
            {m_compute, c.stream, kind()}, prof::OpClass::send, "send", buf.bytes(), int16_t(world_rank_of(peer)), [&] {
                US_NCCL_CHECK(ncclSend(buf.data, size_t(buf.numel), nccl::type_of(buf.dtype), 1, c.comm, c.stream));
            });
    }
    CommHandle irecv(Tensor buf, int peer, int tag) override {
        const Channel& c = channel(peer, rank(), p2p_class(tag));
        return nccl::launch(
            {m_compute, c.stream, kind()}, prof::OpClass::recv, "recv", buf.bytes(), int16_t(world_rank_of(peer)), [&] {
                US_NCCL_CHECK(ncclRecv(buf.data, size_t(buf.numel), nccl::type_of(buf.dtype), 0, c.comm, c.stream));
            });
    }

    // The pipeline group carries messages and host scalars only.
    CommHandle iall_reduce(Tensor, ReduceOp) override { return refuse("all_reduce"); }
    CommHandle ireduce_scatter(Tensor, Tensor, const std::vector<int>&, const std::vector<int>&) override {
        return refuse("reduce_scatter");
    }
    CommHandle iall_gather(Tensor, const std::vector<int>&, const std::vector<int>&) override {
        return refuse("all_gather");
    }
    CommHandle ibroadcast(Tensor, int) override { return refuse("broadcast"); }
    CommHandle iall_to_all(Tensor, Tensor) override { return refuse("all_to_all"); }
    CommHandle iall_to_allv(Tensor, const std::vector<int>&, Tensor, const std::vector<int>&) override {
        return refuse("all_to_allv");
    }

private:
    // Messages from group rank `from` to `to` of one class: NCCL rank 0 sends, rank 1 receives.
    struct Channel {
        int from = 0, to = 0, cls = 0;
        ncclComm_t comm = nullptr;
        cudaStream_t stream = nullptr;
    };

    // Every directed pair of neighbouring stages (the ring's wrap-around too: interleaved schedules send from the
    // last stage to the first), in one order on every rank.
    std::vector<std::pair<int, int>> neighbour_pairs() const {
        std::vector<std::pair<int, int>> pairs;
        const int p = size();
        for (int a = 0; a < p; ++a)
            for (int b : {(a + 1) % p, (a + p - 1) % p})
                if (b != a && std::find(pairs.begin(), pairs.end(), std::pair{a, b}) == pairs.end())
                    pairs.emplace_back(a, b);
        return pairs;
    }

    void open_channels() {
        const std::vector<std::pair<int, int>> pairs = neighbour_pairs();
        const size_t per_rank = pairs.size() * kP2PClasses;
        // Each channel's id is made by its sender; one gather gives every rank the table.
        std::vector<ncclUniqueId> mine(per_rank), all(per_rank * size_t(size()));
        for (size_t i = 0; i < pairs.size(); ++i)
            for (int cls = 0; cls < kP2PClasses; ++cls)
                if (pairs[i].first == rank()) US_NCCL_CHECK(ncclGetUniqueId(&mine[i * kP2PClasses + size_t(cls)]));
        all_gather_bytes(mine.data(), per_rank * sizeof(ncclUniqueId), all.data());
        // Initialised together (a group): no rank waits in one channel's set-up for a peer busy with another's.
        US_NCCL_CHECK(ncclGroupStart());
        for (size_t i = 0; i < pairs.size(); ++i) {
            const auto [from, to] = pairs[i];
            if (from != rank() && to != rank()) continue;
            for (int cls = 0; cls < kP2PClasses; ++cls) {
                Channel c{from, to, cls, nullptr, nullptr};
                US_CUDA_CHECK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
                const ncclUniqueId& id = all[size_t(from) * per_rank + i * kP2PClasses + size_t(cls)];
                US_NCCL_CHECK(ncclCommInitRank(&c.comm, 2, id, rank() == from ? 0 : 1));
                m_channels.push_back(c);
            }
        }
        US_NCCL_CHECK(ncclGroupEnd());
    }

    const Channel& channel(int from, int to, int cls) const {
        for (const Channel& c : m_channels)
            if (c.from == from && c.to == to && c.cls == cls) return c;
        US_ASSERT(false, "the pipeline sends only between neighbouring stages: no channel from stage {} to {}", from,
                  to);
        return m_channels.front();
    }

    CommHandle refuse(const char* op) const {
        US_ASSERT(false, "the pipeline group on NCCL carries point-to-point messages only, not {}", op);
        return completed_handle();
    }

    cudaStream_t m_compute;
    std::vector<Channel> m_channels;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_pipe_communicator(std::unique_ptr<Communicator> host, CudaBackend& backend) {
    return std::make_unique<NcclPipeCommunicator>(std::move(host), backend);
}

}  // namespace us
