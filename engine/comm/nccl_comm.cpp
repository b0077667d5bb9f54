#include "engine/comm/nccl_comm.h"

#include "engine/comm/host_backed_comm.h"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_check.h"
#include "profiler/record/recorder.h"
#include "profiler/record/zones.h"

#define US_NCCL_CHECK(call)                                                                              \
    do {                                                                                                 \
        const ncclResult_t us_nccl_result = (call);                                                      \
        if (us_nccl_result != ncclSuccess) [[unlikely]]                                                  \
            ::us::assertion_failed(#call, __FILE__, __LINE__,                                            \
                                   ::fmt::format("NCCL error: {}", ncclGetErrorString(us_nccl_result))); \
    } while (0)

namespace us {

namespace {

ncclDataType_t nccl_type(DType t) {
    return t == DType::bf16 ? ncclBfloat16 : t == DType::i32 ? ncclInt32 : ncclFloat32;
}

// The GPU-side window of one operation, seen from the host clock by two host callbacks on the comm stream.
struct SpanTiming {
    int64_t begin = 0;
    prof::RecordContext context;
    prof::OpClass op = prof::OpClass::none;
    uint32_t name = 0;  // string id
    uint64_t bytes = 0;
    int16_t peer = -1;
    uint8_t group = 0;
};

void CUDART_CB span_begin(void* p) { static_cast<SpanTiming*>(p)->begin = prof::read_ticks(); }

void CUDART_CB span_end(void* p) {
    auto* t = static_cast<SpanTiming*>(p);
    if (prof::enabled()) {
        prof::context() = t->context;  // the callback thread records for the step, micro-batch and layer of the launch
        prof::record_span(prof::Lane::comm, prof::SpanKind::comm, t->op, t->name, t->begin, prof::read_ticks(), 0,
                          t->bytes, t->peer, t->group);
    }
    delete t;
}

class NcclRequest final : public CommRequest {
public:
    NcclRequest(cudaEvent_t done, cudaStream_t compute) : m_done(done), m_compute(compute) {}
    ~NcclRequest() override { cudaEventDestroy(m_done); }
    bool test() override {
        const cudaError_t e = cudaEventQuery(m_done);
        if (e == cudaErrorNotReady) return false;
        US_CUDA_CHECK(e);
        return true;
    }
    // Device-side: later compute waits for the operation; the host goes on.
    void wait() override { US_CUDA_CHECK(cudaStreamWaitEvent(m_compute, m_done, 0)); }

private:
    cudaEvent_t m_done;
    cudaStream_t m_compute;
};

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
            US_NCCL_CHECK(ncclAllReduce(buf.data, buf.data, size_t(buf.numel), nccl_type(buf.dtype),
                                        how == ReduceOp::max ? ncclMax : ncclSum, m_comm, m_stream));
        });
    }

    CommHandle ireduce_scatter(Tensor send, Tensor recv, const std::vector<int>& counts,
                               const std::vector<int>& displs) override {
        return launch(prof::OpClass::reduce_scatter, "reduce_scatter", send.bytes(), -1, [&] {
            const size_t es = dtype_size(send.dtype);
            if (even(counts, displs)) {
                US_NCCL_CHECK(ncclReduceScatter(send.data, recv.data, size_t(counts[0]), nccl_type(send.dtype), ncclSum,
                                                m_comm, m_stream));
                return;
            }
            US_NCCL_CHECK(ncclGroupStart());
            for (int r = 0; r < size(); ++r)
                US_NCCL_CHECK(ncclReduce(static_cast<char*>(send.data) + size_t(displs[size_t(r)]) * es,
                                         r == rank() ? recv.data : nullptr, size_t(counts[size_t(r)]),
                                         nccl_type(send.dtype), ncclSum, r, m_comm, m_stream));
            US_NCCL_CHECK(ncclGroupEnd());
        });
    }

    CommHandle iall_gather(Tensor buf, const std::vector<int>& counts, const std::vector<int>& displs) override {
        return launch(prof::OpClass::all_gather, "all_gather", buf.bytes(), -1, [&] {
            const size_t es = dtype_size(buf.dtype);
            char* base = static_cast<char*>(buf.data);
            if (even(counts, displs)) {
                US_NCCL_CHECK(ncclAllGather(base + size_t(displs[size_t(rank())]) * es, base, size_t(counts[0]),
                                            nccl_type(buf.dtype), m_comm, m_stream));
                return;
            }
            US_NCCL_CHECK(ncclGroupStart());
            for (int r = 0; r < size(); ++r) {
                void* piece = base + size_t(displs[size_t(r)]) * es;
                US_NCCL_CHECK(
                    ncclBroadcast(piece, piece, size_t(counts[size_t(r)]), nccl_type(buf.dtype), r, m_comm, m_stream));
            }
            US_NCCL_CHECK(ncclGroupEnd());
        });
    }

    CommHandle ibroadcast(Tensor buf, int root) override {
        return launch(prof::OpClass::broadcast, "broadcast", buf.bytes(), -1, [&] {
            US_NCCL_CHECK(
                ncclBroadcast(buf.data, buf.data, size_t(buf.numel), nccl_type(buf.dtype), root, m_comm, m_stream));
        });
    }

    // NCCL matches point-to-point messages by order, not by tag: callers must post them in the same order on
    // both sides (the pipeline uses the staged communicator instead, docs/gpu.md).
    CommHandle isend(Tensor buf, int peer, int) override {
        return launch(prof::OpClass::send, "send", buf.bytes(), int16_t(world_rank_of(peer)), [&] {
            US_NCCL_CHECK(ncclSend(buf.data, size_t(buf.numel), nccl_type(buf.dtype), peer, m_comm, m_stream));
        });
    }
    CommHandle irecv(Tensor buf, int peer, int) override {
        return launch(prof::OpClass::recv, "recv", buf.bytes(), int16_t(world_rank_of(peer)), [&] {
            US_NCCL_CHECK(ncclRecv(buf.data, size_t(buf.numel), nccl_type(buf.dtype), peer, m_comm, m_stream));
        });
    }

    std::pair<CommHandle, CommHandle> isend_recv(Tensor send, int to, Tensor recv, int from, int) override {
        CommHandle h = launch(prof::OpClass::send, "sendrecv", send.bytes(), int16_t(world_rank_of(to)), [&] {
            US_NCCL_CHECK(ncclGroupStart());
            US_NCCL_CHECK(ncclSend(send.data, size_t(send.numel), nccl_type(send.dtype), to, m_comm, m_stream));
            US_NCCL_CHECK(ncclRecv(recv.data, size_t(recv.numel), nccl_type(recv.dtype), from, m_comm, m_stream));
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
                                           nccl_type(send.dtype), r, m_comm, m_stream));
                if (recv_counts[size_t(r)] > 0)
                    US_NCCL_CHECK(ncclRecv(static_cast<char*>(recv.data) + ro * es, size_t(recv_counts[size_t(r)]),
                                           nccl_type(recv.dtype), r, m_comm, m_stream));
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
                                           nccl_type(send.dtype), r, m_comm, m_stream));
                    US_NCCL_CHECK(ncclRecv(static_cast<char*>(recv.data) + size_t(r) * bytes, piece,
                                           nccl_type(recv.dtype), r, m_comm, m_stream));
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

    // Orders the comm stream after the work launched so far, runs `enqueue` between the two span callbacks, and
    // returns a handle on an event after it.
    template <typename Enqueue>
    CommHandle launch(prof::OpClass op, const char* name, size_t bytes, int16_t peer, Enqueue&& enqueue) {
        cudaEvent_t ready = nullptr, done = nullptr;
        US_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
        US_CUDA_CHECK(cudaEventRecord(ready, m_compute));
        US_CUDA_CHECK(cudaStreamWaitEvent(m_stream, ready, 0));
        US_CUDA_CHECK(cudaEventDestroy(ready));  // released once the wait has been satisfied
        SpanTiming* timing = nullptr;
        // interned once, only when recording; a caller's name for the operation (e.g. "reduce_from_tp_region") wins
        const uint32_t caller_name = prof::context().op_name;
        const uint32_t name_id = !prof::enabled() ? 0 : caller_name != UINT32_MAX ? caller_name : prof::string_id(name);
        if (prof::enabled()) {
            timing = new SpanTiming{0, prof::context(), op, name_id, bytes, peer, uint8_t(kind())};
            US_CUDA_CHECK(cudaLaunchHostFunc(m_stream, span_begin, timing));
        }
        {
            // The NCCL kernel is attributed to this collective (and its step, micro-batch, layer) by the CUPTI
            // collector, through the external correlation id pushed around the launch.
            US_PROF_DEVICE_OP(op, name_id);
            enqueue();
        }
        if (timing) US_CUDA_CHECK(cudaLaunchHostFunc(m_stream, span_end, timing));
        US_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
        US_CUDA_CHECK(cudaEventRecord(done, m_stream));
        return std::make_shared<NcclRequest>(done, m_compute);
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
