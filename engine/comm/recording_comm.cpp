// The recording communicator (recording_comm.h): each operation's entry, then the group's own communicator.
#include "engine/comm/recording_comm.h"

#include <algorithm>
#include <numeric>

namespace us {

namespace {

int64_t sum(const std::vector<int>& counts) { return std::accumulate(counts.begin(), counts.end(), int64_t(0)); }

// An operation's handle that marks its entry completed when a wait or a test sees it done. A handle dropped before
// that (a GPU operation whose wait() only orders the streams) is left to the recorder's watchdog to poll.
class RecordedRequest final : public CommRequest {
public:
    RecordedRequest(CommHandle inner, int64_t id, FlightRecorder& recorder)
        : m_inner(std::move(inner)), m_id(id), m_recorder(recorder) {}
    ~RecordedRequest() override {
        if (m_done) return;
        if (m_inner->test())
            m_recorder.completed(m_id);
        else
            m_recorder.watch_unfinished(m_id, m_inner);
    }
    bool test() override {
        if (m_done) return true;
        if (!m_inner->test()) return false;
        done();
        return true;
    }
    void wait() override {
        if (m_done) return;
        m_inner->wait();
        if (m_inner->test()) done();  // on a GPU, wait() returns before the operation completes
    }

private:
    void done() {
        m_done = true;
        m_recorder.completed(m_id);
    }
    CommHandle m_inner;
    int64_t m_id;
    FlightRecorder& m_recorder;
    bool m_done = false;
};

}  // namespace

RecordingCommunicator::RecordingCommunicator(std::unique_ptr<Communicator> inner, const std::string& name,
                                             FlightRecorder& recorder)
    : m_inner(std::move(inner)), m_recorder(recorder) {
    std::vector<int> ranks;
    for (int r = 0; r < m_inner->size(); ++r) ranks.push_back(m_inner->world_rank_of(r));
    m_group = m_recorder.add_group(name, std::string(group_kind_name(m_inner->kind())), std::move(ranks),
                                   m_inner->library(), m_inner->rank());
}

CommHandle RecordingCommunicator::follow(int64_t id, CommHandle inner) {
    m_recorder.started(id);
    if (id < 0) return inner;
    return std::make_shared<RecordedRequest>(std::move(inner), id, m_recorder);
}

CommHandle RecordingCommunicator::iall_reduce(Tensor buf, ReduceOp op) {
    const int64_t id = record({FlightOp::all_reduce, buf.numel, buf.numel, flight_dtype(buf.dtype)});
    return follow(id, m_inner->iall_reduce(buf, op));
}

CommHandle RecordingCommunicator::ireduce_scatter(Tensor send, Tensor recv, const std::vector<int>& counts,
                                                  const std::vector<int>& displs) {
    const int64_t id =
        record({FlightOp::reduce_scatter, sum(counts), counts[size_t(rank())], flight_dtype(send.dtype)});
    return follow(id, m_inner->ireduce_scatter(send, recv, counts, displs));
}

CommHandle RecordingCommunicator::iall_gather(Tensor buf, const std::vector<int>& counts,
                                              const std::vector<int>& displs) {
    const int64_t id = record({FlightOp::all_gather, counts[size_t(rank())], sum(counts), flight_dtype(buf.dtype)});
    return follow(id, m_inner->iall_gather(buf, counts, displs));
}

CommHandle RecordingCommunicator::ibroadcast(Tensor buf, int root) {
    const int64_t id = record({FlightOp::broadcast, buf.numel, buf.numel, flight_dtype(buf.dtype)});
    return follow(id, m_inner->ibroadcast(buf, root));
}

CommHandle RecordingCommunicator::isend(Tensor buf, int peer, int tag) {
    const int64_t id = record({FlightOp::send, buf.numel, buf.numel, flight_dtype(buf.dtype), peer});
    return follow(id, m_inner->isend(buf, peer, tag));
}

CommHandle RecordingCommunicator::irecv(Tensor buf, int peer, int tag) {
    const int64_t id = record({FlightOp::recv, buf.numel, buf.numel, flight_dtype(buf.dtype), peer});
    return follow(id, m_inner->irecv(buf, peer, tag));
}

CommHandle RecordingCommunicator::iall_to_all(Tensor send, Tensor recv) {
    const int64_t id = record({FlightOp::all_to_all, send.numel, recv.numel, flight_dtype(send.dtype)});
    return follow(id, m_inner->iall_to_all(send, recv));
}

CommHandle RecordingCommunicator::iall_to_allv(Tensor send, const std::vector<int>& send_counts, Tensor recv,
                                               const std::vector<int>& recv_counts) {
    const int64_t id = record({FlightOp::all_to_all, sum(send_counts), sum(recv_counts), flight_dtype(send.dtype)});
    return follow(id, m_inner->iall_to_allv(send, send_counts, recv, recv_counts));
}

std::pair<CommHandle, CommHandle> RecordingCommunicator::isend_recv(Tensor send, int to, Tensor recv, int from,
                                                                    int tag) {
    const int64_t sent = record({FlightOp::send, send.numel, send.numel, flight_dtype(send.dtype), to});
    const int64_t received = record({FlightOp::recv, recv.numel, recv.numel, flight_dtype(recv.dtype), from});
    auto [s, r] = m_inner->isend_recv(send, to, recv, from, tag);  // NCCL groups the pair: one call
    return {follow(sent, std::move(s)), follow(received, std::move(r))};
}

CommHandle RecordingCommunicator::ibarrier() {
    const int64_t id = record({FlightOp::barrier, 0, 0, FlightDType::byte});
    return follow(id, m_inner->ibarrier());
}

void RecordingCommunicator::all_reduce(Tensor buf, ReduceOp op) {
    blocking({FlightOp::all_reduce, buf.numel, buf.numel, flight_dtype(buf.dtype)},
             [&] { m_inner->all_reduce(buf, op); });
}

void RecordingCommunicator::reduce_scatter(Tensor send, Tensor recv, const std::vector<int>& counts,
                                           const std::vector<int>& displs) {
    blocking({FlightOp::reduce_scatter, sum(counts), counts[size_t(rank())], flight_dtype(send.dtype)},
             [&] { m_inner->reduce_scatter(send, recv, counts, displs); });
}

void RecordingCommunicator::all_gather(Tensor buf, const std::vector<int>& counts, const std::vector<int>& displs) {
    blocking({FlightOp::all_gather, counts[size_t(rank())], sum(counts), flight_dtype(buf.dtype)},
             [&] { m_inner->all_gather(buf, counts, displs); });
}

double RecordingCommunicator::all_reduce_sum(double value) {
    double out = 0;
    blocking({FlightOp::all_reduce, 1, 1, FlightDType::float64}, [&] { out = m_inner->all_reduce_sum(value); });
    return out;
}

double RecordingCommunicator::all_reduce_max(double value) {
    double out = 0;
    blocking({FlightOp::all_reduce, 1, 1, FlightDType::float64}, [&] { out = m_inner->all_reduce_max(value); });
    return out;
}

void RecordingCommunicator::all_gather_bytes(const void* send, size_t bytes_per_rank, void* recv) {
    const int64_t n = int64_t(bytes_per_rank);
    blocking({FlightOp::all_gather, n, n * size(), FlightDType::byte},
             [&] { m_inner->all_gather_bytes(send, bytes_per_rank, recv); });
}

void RecordingCommunicator::all_to_all_bytes(const void* send, size_t bytes_per_rank, void* recv) {
    const int64_t n = int64_t(bytes_per_rank) * size();
    blocking({FlightOp::all_to_all, n, n, FlightDType::byte},
             [&] { m_inner->all_to_all_bytes(send, bytes_per_rank, recv); });
}

int64_t RecordingCommunicator::record_phantom_all_reduce(DType dtype, int64_t numel) {
    const int64_t id = record({FlightOp::all_reduce, numel, numel, flight_dtype(dtype)});
    m_recorder.started(id);
    return id;
}

std::unique_ptr<Communicator> record_in_flight(std::unique_ptr<Communicator> group, const std::string& label,
                                               FlightRecorder& recorder) {
    if (!recorder.enabled() || group->size() < 2) return group;
    int lowest = group->world_rank_of(0);
    for (int r = 1; r < group->size(); ++r) lowest = std::min(lowest, group->world_rank_of(r));
    const std::string name = label + ":" + std::to_string(lowest);
    return std::make_unique<RecordingCommunicator>(std::move(group), name, recorder);
}

int64_t record_phantom_all_reduce(Communicator& group, DType dtype, int64_t numel) {
    auto* recording = dynamic_cast<RecordingCommunicator*>(&group);
    return recording ? recording->record_phantom_all_reduce(dtype, numel) : -1;
}

}  // namespace us
