#include "engine/comm/nccl_comm.h"

#include "engine/comm/host_backed_comm.h"
#include "engine/comm/nccl_launch.h"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_check.h"

namespace us {

namespace {

using nccl::type_of;

class NcclCommunicator final : public HostBackedCommunicator {
public:
    NcclCommunicator(std::unique_ptr<Communicator> host, CudaBackend& backend)
        : HostBackedCommunicator(std::move(host)),
          m_compute(backend.compute_stream()),
          m_stream(backend.comm_stream()) {
        ncclUniqueId id{};
        if (rank() == 0) US_NCCL_CHECK(ncclGetUniqueId(&id));
        std::vector<ncclUniqueId> all(static_cast<size_t>(size()));
        all_gather_bytes(&id, sizeof id, all.data());
        US_NCCL_CHECK(ncclCommInitRank(&m_comm, size(), all[0], rank()));
    }
    ~NcclCommunicator() override {
        cudaStreamSynchronize(m_stream);
        ncclCommDestroy(m_comm);
    }
    const char* library() const override { return "nccl"; }

    CommHandle iall_reduce(Tensor buf, ReduceOp how) override {
        return launch(prof::OpClass::all_reduce, "all_reduce", buf.bytes(), -1, [&] {
            US_NCCL_CHECK(ncclAllReduce(buf.data, buf.data, size_t(buf.numel), type_of(buf.dtype),
                                        how == ReduceOp::max ? ncclMax : ncclSum, m_comm, m_stream));
        });
    }

    CommHandle ireduce_scatter(Tensor send, Tensor recv, const std::vector<int>& counts,
                               const std::vector<int>& displs) override {
        return launch(prof::OpClass::reduce_scatter, "reduce_scatter", send.bytes(), -1, [&] {
            const size_t es = dtype_size(send.dtype);
            if (even(counts, displs)) {
                US_NCCL_CHECK(ncclReduceScatter(send.data, recv.data, size_t(counts[0]), type_of(send.dtype), ncclSum,
                                                m_comm, m_stream));
                return;
            }
            US_NCCL_CHECK(ncclGroupStart());
            for (int r = 0; r < size(); ++r)
                US_NCCL_CHECK(ncclReduce(static_cast<char*>(send.data) + size_t(displs[size_t(r)]) * es,
                                         r == rank() ? recv.data : nullptr, size_t(counts[size_t(r)]),
                                         type_of(send.dtype), ncclSum, r, m_comm, m_stream));
            US_NCCL_CHECK(ncclGroupEnd());
        });
    }

    CommHandle iall_gather(Tensor buf, const std::vector<int>& counts, const std::vector<int>& displs) override {
        return launch(prof::OpClass::all_gather, "all_gather", buf.bytes(), -1, [&] {
            const size_t es = dtype_size(buf.dtype);
            char* base = static_cast<char*>(buf.data);
            if (even(counts, displs)) {
                US_NCCL_CHECK(ncclAllGather(base + size_t(displs[size_t(rank())]) * es, base, size_t(counts[0]),
                                            type_of(buf.dtype), m_comm, m_stream));
                return;
            }
            US_NCCL_CHECK(ncclGroupStart());
            for (int r = 0; r < size(); ++r) {
                void* piece = base + size_t(displs[size_t(r)]) * es;
                US_NCCL_CHECK(
                    ncclBroadcast(piece, piece, size_t(counts[size_t(r)]), type_of(buf.dtype), r, m_comm, m_stream));
            }
            US_NCCL_CHECK(ncclGroupEnd());
        });
    }

    CommHandle ibroadcast(Tensor buf, int root) override {
        return launch(prof::OpClass::broadcast, "broadcast", buf.bytes(), -1, [&] {
            US_NCCL_CHECK(
                ncclBroadcast(buf.data, buf.data, size_t(buf.numel), type_of(buf.dtype), root, m_comm, m_stream));
        });
    }

    // NCCL matches point-to-point messages by order, not by tag: callers must post them in the same order on
    // both sides (the pipeline's messages go through channels of their own, nccl_pipe_comm.h).
    CommHandle isend(Tensor buf, int peer, int) override {
        return launch(prof::OpClass::send, "send", buf.bytes(), int16_t(world_rank_of(peer)), [&] {
            US_NCCL_CHECK(ncclSend(buf.data, size_t(buf.numel), type_of(buf.dtype), peer, m_comm, m_stream));
        });
    }
    CommHandle irecv(Tensor buf, int peer, int) override {
        return launch(prof::OpClass::recv, "recv", buf.bytes(), int16_t(world_rank_of(peer)), [&] {
            US_NCCL_CHECK(ncclRecv(buf.data, size_t(buf.numel), type_of(buf.dtype), peer, m_comm, m_stream));
        });
    }

    std::pair<CommHandle, CommHandle> isend_recv(Tensor send, int to, Tensor recv, int from, int) override {
        CommHandle h = launch(prof::OpClass::send, "sendrecv", send.bytes(), int16_t(world_rank_of(to)), [&] {
            US_NCCL_CHECK(ncclGroupStart());
            US_NCCL_CHECK(ncclSend(send.data, size_t(send.numel), type_of(send.dtype), to, m_comm, m_stream));
            US_NCCL_CHECK(ncclRecv(recv.data, size_t(recv.numel), type_of(recv.dtype), from, m_comm, m_stream));
            US_NCCL_CHECK(ncclGroupEnd());
        });
        return {h, h};
    }

    CommHandle iall_to_allv(Tensor send, const std::vector<int>& send_counts, Tensor recv,
                            const std::vector<int>& recv_counts) override {
        size_t out = 0;
        for (int r = 0; r < size(); ++r)
            if (r != rank()) out += size_t(send_counts[size_t(r)]) * dtype_size(send.dtype);
        return launch(prof::OpClass::all_to_all, "all_to_allv", out, -1, [&] {
            const size_t es = dtype_size(send.dtype);
            size_t so = 0, ro = 0;
            US_NCCL_CHECK(ncclGroupStart());
            for (int r = 0; r < size(); ++r) {
                if (send_counts[size_t(r)] > 0)
                    US_NCCL_CHECK(ncclSend(static_cast<char*>(send.data) + so * es, size_t(send_counts[size_t(r)]),
                                           type_of(send.dtype), r, m_comm, m_stream));
                if (recv_counts[size_t(r)] > 0)
                    US_NCCL_CHECK(ncclRecv(static_cast<char*>(recv.data) + ro * es, size_t(recv_counts[size_t(r)]),
                                           type_of(recv.dtype), r, m_comm, m_stream));
                so += size_t(send_counts[size_t(r)]);
                ro += size_t(recv_counts[size_t(r)]);
            }
            US_NCCL_CHECK(ncclGroupEnd());
        });
    }

    CommHandle iall_to_all(Tensor send, Tensor recv) override {
        return launch(
            prof::OpClass::all_to_all, "all_to_all", send.bytes() / size_t(size()) * size_t(size() - 1), -1, [&] {
                const size_t piece = size_t(send.numel) / size_t(size()), bytes = piece * dtype_size(send.dtype);
                US_NCCL_CHECK(ncclGroupStart());
                for (int r = 0; r < size(); ++r) {
                    US_NCCL_CHECK(ncclSend(static_cast<char*>(send.data) + size_t(r) * bytes, piece,
                                           type_of(send.dtype), r, m_comm, m_stream));
                    US_NCCL_CHECK(ncclRecv(static_cast<char*>(recv.data) + size_t(r) * bytes, piece,
                                           type_of(recv.dtype), r, m_comm, m_stream));
                }
                US_NCCL_CHECK(ncclGroupEnd());
            });
    }

private:
    static bool even(const std::vector<int>& counts, const std::vector<int>& displs) {
        for (size_t r = 0; r < counts.size(); ++r)
            if (counts[r] != counts[0] || displs[r] != int(r) * counts[0]) return false;
        return true;
    }

    template <typename Enqueue>
    CommHandle launch(prof::OpClass op, const char* name, size_t bytes, int16_t peer, Enqueue&& enqueue) {
        return nccl::launch({m_compute, m_stream, kind()}, op, name, bytes, peer, std::forward<Enqueue>(enqueue));
    }

    cudaStream_t m_compute, m_stream;
    ncclComm_t m_comm = nullptr;
};

}  // namespace

std::string cuda_device_identity(int device) {
    char bus[64] = {};
    US_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, device));
    // NCCL tells hosts apart by NCCL_HOSTID where it is set (else by the host name): ranks given distinct values
    // are distinct hosts to it, even on one GPU, and talk through its network transport (docs/gpu.md).
    if (const char* id = std::getenv("NCCL_HOSTID"); id && *id) return fmt::format("{}:{}", id, bus);
    char host[128] = {};
    gethostname(host, sizeof host - 1);
    return fmt::format("{}:{}", host, bus);
}

bool group_has_distinct_devices(Communicator& group, int device, std::string* why) {
    char mine[192] = {};
    const std::string id = cuda_device_identity(device);
    std::strncpy(mine, id.c_str(), sizeof mine - 1);
    std::vector<char> all(sizeof mine * size_t(group.size()));
    group.all_gather_bytes(mine, sizeof mine, all.data());
    for (int a = 0; a < group.size(); ++a)
        for (int b = a + 1; b < group.size(); ++b)
            if (std::strncmp(&all[size_t(a) * sizeof mine], &all[size_t(b) * sizeof mine], sizeof mine) == 0) {
                if (why)
                    *why = fmt::format("ranks {} and {} of the {} group share GPU {} (NCCL needs one GPU per rank)",
                                       group.world_rank_of(a), group.world_rank_of(b), group_kind_name(group.kind()),
                                       &all[size_t(a) * sizeof mine]);
                return false;
            }
    return true;
}

std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> host, CudaBackend& backend) {
    return std::make_unique<NcclCommunicator>(std::move(host), backend);
}

}  // namespace us
