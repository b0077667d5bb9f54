#include "engine/comm/mpi_comm.h"

// The MPI communicator (its collectives, sends and the process groups) and the runtime (init, split, the clock
// offset estimate). Operations complete through the progress engine (mpi_progress.h).
#include <mpi.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/comm/flight_dumps.h"
#include "engine/comm/mpi_progress.h"
#include "common/core/check.h"
#include "profiler/record/zones.h"

namespace us {

bool launched_by_mpi() {
    for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
        if (std::getenv(var)) return true;
    return false;
}

namespace {

// bf16 sums: each pair is added in fp32 and rounded once, as the engine's own bf16 arithmetic does.
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
    const auto* a = static_cast<const bf16*>(in);
    auto* b = static_cast<bf16*>(inout);
    for (int i = 0; i < *len; ++i) b[i] = f32_to_bf16(bf16_to_f32(a[i]) + bf16_to_f32(b[i]));
}

MPI_Datatype mpi_type(DType t) {
    switch (t) {
        case DType::f32:
            return MPI_FLOAT;
        case DType::bf16:
            return MPI_UINT16_T;
        case DType::i32:
            return MPI_INT;
    }
    return MPI_BYTE;
}

MPI_Op g_bf16_sum = MPI_OP_NULL;
bool g_initialized = false;
bool g_thread_multiple = false;  // MPI may be called from the compute thread while the progress thread runs

class MpiCommunicator final : public Communicator {
public:
    MpiCommunicator(MPI_Comm comm, GroupKind kind) : m_comm(comm), m_kind(kind) {
        MPI_Comm_rank(comm, &m_rank);
        MPI_Comm_size(comm, &m_size);
        MPI_Group world_group, group;
        MPI_Comm_group(MPI_COMM_WORLD, &world_group);
        MPI_Comm_group(comm, &group);
        std::vector<int> mine(static_cast<size_t>(m_size)), world(static_cast<size_t>(m_size));
        for (int i = 0; i < m_size; ++i) mine[size_t(i)] = i;
        MPI_Group_translate_ranks(group, m_size, mine.data(), world_group, world.data());
        m_world_ranks = world;
        MPI_Group_free(&world_group);
        MPI_Group_free(&group);
    }
    ~MpiCommunicator() override {
        if (m_comm != MPI_COMM_WORLD && g_initialized) MPI_Comm_free(&m_comm);
    }
    MPI_Comm comm() const { return m_comm; }
    int rank() const override { return m_rank; }
    int size() const override { return m_size; }
    GroupKind kind() const override { return m_kind; }
    int world_rank_of(int r) const override { return m_world_ranks[size_t(r)]; }

    CommHandle iall_reduce(Tensor buf, ReduceOp how) override {
        if (m_size == 1 || buf.numel == 0) return completed_handle();
        US_ASSERT(how == ReduceOp::sum || buf.dtype == DType::f32, "max all-reduce of a {} tensor",
                  dtype_name(buf.dtype));
        auto op = make(prof::OpClass::all_reduce, "all_reduce", buf.bytes());
        MPI_Comm c = m_comm;
        const MPI_Op sum = how == ReduceOp::max ? MPI_MAX : reduce_op(buf.dtype);
        op->start = [=](MPI_Request* r) {
            return MPI_Iallreduce(MPI_IN_PLACE, buf.data, int(buf.numel), mpi_type(buf.dtype), sum, c, r);
        };
        return submit(op);
    }
    CommHandle ireduce_scatter(Tensor send, Tensor recv, const std::vector<int>& counts,
                               const std::vector<int>& displs) override {
        US_ASSERT(int(counts.size()) == m_size && int(displs.size()) == m_size, "counts per rank");
        if (m_size == 1) {
            std::memmove(recv.data, send.slice(displs[0], counts[0]).data, size_t(counts[0]) * dtype_size(send.dtype));
            return completed_handle();
        }
        // MPI_Reduce_scatter takes the pieces back to back; ours are, since displs are cumulative counts.
        for (int r = 1; r < m_size; ++r)
            US_ASSERT(displs[size_t(r)] == displs[size_t(r - 1)] + counts[size_t(r - 1)], "pieces must be contiguous");
        auto op = make(prof::OpClass::reduce_scatter, "reduce_scatter", send.bytes());
        MPI_Comm c = m_comm;
        auto cnt = std::make_shared<std::vector<int>>(counts);
        op->keep = cnt;
        const void* src = send.slice(displs[0], 0).data;
        const MPI_Op sum = reduce_op(send.dtype);
        op->start = [=](MPI_Request* r) {
            return MPI_Ireduce_scatter(src, recv.data, cnt->data(), mpi_type(send.dtype), sum, c, r);
        };
        return submit(op);
    }
    CommHandle iall_gather(Tensor buf, const std::vector<int>& counts, const std::vector<int>& displs) override {
        if (m_size == 1) return completed_handle();
        auto op = make(prof::OpClass::all_gather, "all_gather", buf.bytes());
        MPI_Comm c = m_comm;
        auto cd = std::make_shared<std::pair<std::vector<int>, std::vector<int>>>(counts, displs);
        op->keep = cd;
        op->start = [=](MPI_Request* r) {
            return MPI_Iallgatherv(MPI_IN_PLACE, 0, mpi_type(buf.dtype), buf.data, cd->first.data(), cd->second.data(),
                                   mpi_type(buf.dtype), c, r);
        };
        return submit(op);
    }
    CommHandle ibroadcast(Tensor buf, int root) override {
        if (m_size == 1) return completed_handle();
        auto op = make(prof::OpClass::broadcast, "broadcast", buf.bytes());
        MPI_Comm c = m_comm;
        op->start = [=](MPI_Request* r) {
            return MPI_Ibcast(buf.data, int(buf.numel), mpi_type(buf.dtype), root, c, r);
        };
        return submit(op);
    }
    CommHandle isend(Tensor buf, int peer, int tag) override {
        auto op = make(prof::OpClass::send, "send", buf.bytes());
        op->lane = transfer_lane();
        op->peer = int16_t(world_rank_of(peer));
        MPI_Comm c = m_comm;
        op->start = [=](MPI_Request* r) {
            return MPI_Isend(buf.data, int(buf.numel), mpi_type(buf.dtype), peer, tag, c, r);
        };
        return submit(op);
    }
    CommHandle irecv(Tensor buf, int peer, int tag) override {
        auto op = make(prof::OpClass::recv, "recv", buf.bytes());
        op->lane = transfer_lane();
        op->peer = int16_t(world_rank_of(peer));
        MPI_Comm c = m_comm;
        op->start = [=](MPI_Request* r) {
            return MPI_Irecv(buf.data, int(buf.numel), mpi_type(buf.dtype), peer, tag, c, r);
        };
        return submit(op);
    }
    CommHandle iall_to_allv(Tensor send, const std::vector<int>& send_counts, Tensor recv,
                            const std::vector<int>& recv_counts) override {
        // The span's bytes: what goes to the other ranks (this rank's own piece stays).
        uint64_t out = 0;
        for (int r = 0; r < m_size; ++r)
            if (r != m_rank) out += uint64_t(send_counts[size_t(r)]) * dtype_size(send.dtype);
        auto op = make(prof::OpClass::all_to_all, "all_to_allv", out);
        auto v = std::make_shared<std::array<std::vector<int>, 4>>();
        (*v)[0] = send_counts, (*v)[2] = recv_counts;
        (*v)[1].resize(size_t(m_size)), (*v)[3].resize(size_t(m_size));
        for (int r = 1; r < m_size; ++r) {
            (*v)[1][size_t(r)] = (*v)[1][size_t(r - 1)] + send_counts[size_t(r - 1)];
            (*v)[3][size_t(r)] = (*v)[3][size_t(r - 1)] + recv_counts[size_t(r - 1)];
        }
        op->keep = v;
        MPI_Comm c = m_comm;
        const MPI_Datatype t = mpi_type(send.dtype);
        op->start = [=](MPI_Request* r) {
            return MPI_Ialltoallv(send.data, (*v)[0].data(), (*v)[1].data(), t, recv.data, (*v)[2].data(),
                                  (*v)[3].data(), t, c, r);
        };
        return submit(op);
    }
    CommHandle iall_to_all(Tensor send, Tensor recv) override {
        // The span's bytes: what goes to the other ranks (this rank's own piece stays).
        auto op = make(prof::OpClass::all_to_all, "all_to_all", send.bytes() / size_t(m_size) * size_t(m_size - 1));
        MPI_Comm c = m_comm;
        const int per = int(send.numel / m_size);
        op->start = [=](MPI_Request* r) {
            return MPI_Ialltoall(send.data, per, mpi_type(send.dtype), recv.data, per, mpi_type(recv.dtype), c, r);
        };
        return submit(op);
    }
    CommHandle ibarrier() override {
        if (m_size == 1) return completed_handle();
        auto op = make(prof::OpClass::barrier, "barrier", 0);
        MPI_Comm c = m_comm;
        op->start = [=](MPI_Request* r) { return MPI_Ibarrier(c, r); };
        return submit(op);
    }
    // Blocking collectives run on the calling thread when the group has nothing in flight (the tensor-parallel
    // group's, on the critical path by nature): no hand-off to the progress thread and back.
    void all_reduce(Tensor buf, ReduceOp how) override {
        if (!direct() || m_size == 1 || buf.numel == 0) return Communicator::all_reduce(buf, how);
        const MPI_Op op = how == ReduceOp::max ? MPI_MAX : reduce_op(buf.dtype);
        run_direct(prof::OpClass::all_reduce, "all_reduce", buf.bytes(), [&] {
            return MPI_Allreduce(MPI_IN_PLACE, buf.data, int(buf.numel), mpi_type(buf.dtype), op, m_comm);
        });
    }
    void reduce_scatter(Tensor send, Tensor recv, const std::vector<int>& counts,
                        const std::vector<int>& displs) override {
        if (!direct() || m_size == 1) return Communicator::reduce_scatter(send, recv, counts, displs);
        for (int r = 1; r < m_size; ++r)
            US_ASSERT(displs[size_t(r)] == displs[size_t(r - 1)] + counts[size_t(r - 1)], "pieces must be contiguous");
        const void* src = send.slice(displs[0], 0).data;
        run_direct(prof::OpClass::reduce_scatter, "reduce_scatter", send.bytes(), [&] {
            return MPI_Reduce_scatter(src, recv.data, counts.data(), mpi_type(send.dtype), reduce_op(send.dtype),
                                      m_comm);
        });
    }
    void all_gather(Tensor buf, const std::vector<int>& counts, const std::vector<int>& displs) override {
        if (!direct() || m_size == 1) return Communicator::all_gather(buf, counts, displs);
        run_direct(prof::OpClass::all_gather, "all_gather", buf.bytes(), [&] {
            return MPI_Allgatherv(MPI_IN_PLACE, 0, mpi_type(buf.dtype), buf.data, counts.data(), displs.data(),
                                  mpi_type(buf.dtype), m_comm);
        });
    }
    void all_to_all_bytes(const void* send, size_t bytes, void* recv) override {
        if (m_size == 1) {
            std::memcpy(recv, send, bytes);
            return;
        }
        auto op = make(prof::OpClass::all_to_all, "all_to_all", bytes * size_t(m_size - 1));
        MPI_Comm c = m_comm;
        op->start = [=](MPI_Request* r) {
            return MPI_Ialltoall(send, int(bytes), MPI_BYTE, recv, int(bytes), MPI_BYTE, c, r);
        };
        submit(op)->wait();
    }
    double all_reduce_sum(double v) override { return scalar(v, MPI_SUM); }
    double all_reduce_max(double v) override { return scalar(v, MPI_MAX); }
    void all_gather_bytes(const void* send, size_t bytes, void* recv) override {
        if (m_size == 1) {
            std::memcpy(recv, send, bytes);
            return;
        }
        auto op = make(prof::OpClass::all_gather, "all_gather", bytes * size_t(m_size));
        op->submit_ticks = 0;
        MPI_Comm c = m_comm;
        op->start = [=](MPI_Request* r) {
            return MPI_Iallgather(send, int(bytes), MPI_BYTE, recv, int(bytes), MPI_BYTE, c, r);
        };
        submit(op)->wait();
    }

private:
    MPI_Op reduce_op(DType t) const { return t == DType::bf16 ? g_bf16_sum : MPI_SUM; }
    // Pipeline (and checkpoint) transfers go on the p2p lane, whose waits are bubbles; the context-parallel ring's
    // and expert parallelism's exchanges are communication that compute can hide: the comm lane.
    prof::Lane transfer_lane() const {
        return m_kind == GroupKind::cp || m_kind == GroupKind::ep ? prof::Lane::comm : prof::Lane::p2p;
    }

    // Collectives of one communicator must start in the same order on every rank: a blocking one may bypass the
    // progress thread only when none of the group's is queued or running.
    bool direct() const {
        return (g_thread_multiple || !mpi_progress_engine().threaded()) &&
               m_pending->load(std::memory_order_acquire) == 0;
    }
    // The call, with the same records as the queued path: a comm span, and the caller's wait on the compute lane.
    template <typename Call>
    void run_direct(prof::OpClass cls, const char* verb, uint64_t bytes, Call&& call) {
        const bool record = prof::enabled();
        const int64_t t0 = record ? prof::read_ticks() : 0;
        US_MPI_CHECK(call());
        if (!record) return;
        const int64_t t1 = prof::read_ticks();
        const uint32_t caller = prof::context().op_name;
        prof::record_span(prof::Lane::comm, prof::SpanKind::comm, cls,
                          caller != UINT32_MAX ? caller : prof::string_id(prof_name(verb)), t0, t1, 0, bytes, -1,
                          uint8_t(m_kind));
        prof::record_span(prof::Lane::compute, prof::SpanKind::wait, cls, US_PROF_NAME("wait for communication"), t0,
                          t1, 0, bytes, -1, uint8_t(m_kind));
    }

    std::shared_ptr<MpiOp> make(prof::OpClass cls, const char* verb, uint64_t bytes) {
        auto op = std::make_shared<MpiOp>();
        op->group_pending = m_pending;
        op->op = cls;
        op->group = uint8_t(m_kind);
        op->bytes = bytes;
        op->what = prof_name(verb);
        return op;
    }
    // "all_reduce dp": names carry the group so the timeline and the watchdog can say which one.
    const char* prof_name(const char* verb) const {
        return intern_name(std::string(verb) + " " + std::string(group_kind_name(m_kind)));
    }
    static const char* intern_name(const std::string& s);

    CommHandle submit(const std::shared_ptr<MpiOp>& op) {
        m_pending->fetch_add(1, std::memory_order_acq_rel);
        mpi_progress_engine().submit(op);
        return op;
    }
    double scalar(double v, MPI_Op mpi_op) {
        if (m_size == 1) return v;
        auto value = std::make_shared<double>(v);
        auto op = make(prof::OpClass::all_reduce, "all_reduce", sizeof(double));
        op->keep = value;
        MPI_Comm c = m_comm;
        op->start = [=](MPI_Request* r) {
            return MPI_Iallreduce(MPI_IN_PLACE, value.get(), 1, MPI_DOUBLE, mpi_op, c, r);
        };
        submit(op)->wait();
        return *value;
    }

    MPI_Comm m_comm;
    GroupKind m_kind;
    std::shared_ptr<std::atomic<int>> m_pending = std::make_shared<std::atomic<int>>(0);
    int m_rank = 0, m_size = 1;
    std::vector<int> m_world_ranks;
};

const char* MpiCommunicator::intern_name(const std::string& s) {
    static std::mutex mutex;
    static std::deque<std::string> names;
    std::lock_guard lock(mutex);
    for (const auto& n : names)
        if (n == s) return n.c_str();
    return names.emplace_back(s).c_str();
}

}  // namespace

void MpiRuntime::init(int* argc, char*** argv, const std::string& progress) {
    if (g_initialized) return;
    int provided = 0;
    US_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
    g_thread_multiple = provided >= MPI_THREAD_MULTIPLE;
    if (provided < MPI_THREAD_SERIALIZED)
        abort(
            3,
            "this MPI does not support calls from a progress thread (MPI_THREAD_SERIALIZED); use --comm-progress poll");
    US_MPI_CHECK(MPI_Op_create(&bf16_sum, 1, &g_bf16_sum));
    g_initialized = true;
    mpi_progress_engine().start(progress != "poll");
}

bool MpiRuntime::initialized() { return g_initialized; }

void MpiRuntime::finalize() {
    if (!g_initialized) return;
    mpi_progress_engine().stop();
    MPI_Op_free(&g_bf16_sum);
    g_initialized = false;
    MPI_Finalize();
}

void MpiRuntime::abort(int code, const std::string& why) {
    std::fprintf(stderr, "ultrascope-train: rank %d: %s\n", g_initialized ? world_rank() : -1, why.c_str());
    std::fflush(stderr);
    write_flight_dump_on_death(why);  // what this rank was waiting for, before the job goes
    prof::stop_recording(false);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
}

int MpiRuntime::world_rank() {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

int MpiRuntime::world_size() {
    int s = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    return s;
}

std::unique_ptr<Communicator> MpiRuntime::world(GroupKind kind) {
    MPI_Comm dup;
    US_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    return std::make_unique<MpiCommunicator>(dup, kind);
}

std::unique_ptr<Communicator> MpiRuntime::split(const Communicator& parent, int color, int key, GroupKind kind) {
    const auto& p = dynamic_cast<const MpiCommunicator&>(parent);
    MPI_Comm out;
    US_MPI_CHECK(MPI_Comm_split(p.comm(), color, key, &out));
    return std::make_unique<MpiCommunicator>(out, kind);
}

void MpiRuntime::progress() {
    if (g_initialized) mpi_progress_engine().progress();
}

std::string MpiRuntime::library_version() {
    char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    MPI_Get_library_version(text, &len);
    std::string version(text, size_t(len));
    if (const size_t end = version.find_first_of(",\n"); end != std::string::npos) version.resize(end);
    return version;
}

std::string MpiRuntime::processor_name() {
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int len = 0;
    MPI_Get_processor_name(name, &len);
    return std::string(name, size_t(len));
}

void MpiRuntime::estimate_clock_offset(int64_t& offset_ns, int64_t& uncertainty_ns) {
    offset_ns = 0;
    uncertainty_ns = 0;
    const int size = world_size(), rank = world_rank();
    if (size == 1) return;
    auto world = MpiRuntime::world();
    // Ranks on one host share CLOCK_MONOTONIC: nothing to estimate, unless a test shifted one rank's clock (the
    // variable is in every rank's environment, so every rank takes the same branch).
    static const bool one_host = [&] {
        char host[256] = {};
        gethostname(host, sizeof host - 1);
        std::vector<char> hosts(size_t(size) * sizeof host);
        world->all_gather_bytes(host, sizeof host, hosts.data());
        bool same = true;
        for (int r = 1; r < size; ++r) same &= std::strcmp(hosts.data(), hosts.data() + size_t(r) * sizeof host) == 0;
        return same;
    }();
    if (one_host && !std::getenv("ULTRASCOPE_FAKE_CLOCK_OFFSET_NS")) return;
    // Cristian's method against rank 0, as NTP does it: of 16 round trips, the shortest bounds the error by half its
    // length (rank 0's reading lies somewhere inside it); its midpoint is taken as the moment rank 0 read its clock.
    auto* comm = dynamic_cast<MpiCommunicator*>(world.get());
    int64_t best_rtt = INT64_MAX;
    for (int peer = 1; peer < size; ++peer)
        for (int k = 0; k < 16; ++k) {
            if (rank == peer) {
                int64_t t0 = prof::monotonic_ns(), remote = 0;
                MPI_Send(&t0, 1, MPI_INT64_T, 0, 77, comm->comm());
                MPI_Recv(&remote, 1, MPI_INT64_T, 0, 78, comm->comm(), MPI_STATUS_IGNORE);
                const int64_t t1 = prof::monotonic_ns();
                if (t1 - t0 < best_rtt) {
                    best_rtt = t1 - t0;
                    offset_ns = (t0 + t1) / 2 - remote;
                    uncertainty_ns = (t1 - t0 + 1) / 2;
                }
            } else if (rank == 0) {
                int64_t t = 0;
                MPI_Recv(&t, 1, MPI_INT64_T, peer, 77, comm->comm(), MPI_STATUS_IGNORE);
                t = prof::monotonic_ns();
                MPI_Send(&t, 1, MPI_INT64_T, peer, 78, comm->comm());
            }
        }
}

}  // namespace us
