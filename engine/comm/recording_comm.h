// A Communicator that records every operation of its group in the flight recorder (flight_recorder.h) and passes
// it on to the group's communicator: scheduled when called, started once the library has it, completed when a
// wait or test sees it done (PyTorch's "discovered" times). Wrapped around each process group of the grid, it is
// the one place operations enter the recorder, whatever library carries them.
#pragma once

#include <memory>
#include <string>

#include "engine/comm/communicator.h"
#include "engine/comm/flight_recorder.h"

namespace us {

class RecordingCommunicator final : public Communicator {
public:
    // `name` is the group instance's name, the same on every member and unique in the job ("dp:0"); the kind's name
    // is its desc.
    RecordingCommunicator(std::unique_ptr<Communicator> inner, const std::string& name, FlightRecorder& recorder);

    int rank() const override { return m_inner->rank(); }
    int size() const override { return m_inner->size(); }
    GroupKind kind() const override { return m_inner->kind(); }
    int world_rank_of(int r) const override { return m_inner->world_rank_of(r); }
    const char* library() const override { return m_inner->library(); }
    Communicator& inner() { return *m_inner; }

    CommHandle iall_reduce(Tensor buf, ReduceOp op) override;
    CommHandle ireduce_scatter(Tensor send, Tensor recv, const std::vector<int>& counts,
                               const std::vector<int>& displs) override;
    CommHandle iall_gather(Tensor buf, const std::vector<int>& counts, const std::vector<int>& displs) override;
    CommHandle ibroadcast(Tensor buf, int root) override;
    CommHandle isend(Tensor buf, int peer, int tag) override;
    CommHandle irecv(Tensor buf, int peer, int tag) override;
    CommHandle iall_to_all(Tensor send, Tensor recv) override;
    CommHandle iall_to_allv(Tensor send, const std::vector<int>& send_counts, Tensor recv,
                            const std::vector<int>& recv_counts) override;
    std::pair<CommHandle, CommHandle> isend_recv(Tensor send, int to, Tensor recv, int from, int tag) override;
    CommHandle ibarrier() override;

    void all_reduce(Tensor buf, ReduceOp op) override;
    void reduce_scatter(Tensor send, Tensor recv, const std::vector<int>& counts,
                        const std::vector<int>& displs) override;
    void all_gather(Tensor buf, const std::vector<int>& counts, const std::vector<int>& displs) override;

    double all_reduce_sum(double value) override;
    double all_reduce_max(double value) override;
    void all_gather_bytes(const void* send, size_t bytes_per_rank, void* recv) override;
    void all_to_all_bytes(const void* send, size_t bytes_per_rank, void* recv) override;

    // Fault injection (--hang-kind mismatch): records an all-reduce of `numel` elements as started, as if this rank
    // had entered it, without calling the library (MPI with mismatched counts is undefined). Returns its id.
    int64_t record_phantom_all_reduce(DType dtype, int64_t numel);

private:
    int64_t record(const FlightCall& call) { return m_recorder.record(m_group, call); }
    CommHandle follow(int64_t id, CommHandle inner);
    // A blocking call: started as it is made, completed when it returns.
    template <typename Call>
    void blocking(const FlightCall& call, Call&& run) {
        const int64_t id = record(call);
        m_recorder.started(id);
        run();
        m_recorder.completed(id);
    }

    std::unique_ptr<Communicator> m_inner;
    FlightRecorder& m_recorder;
    int m_group = 0;
};

// Wraps `group` in a RecordingCommunicator named "<label>:<its lowest world rank>" when the recorder is on and the
// group has other members; returns it unchanged otherwise.
std::unique_ptr<Communicator> record_in_flight(std::unique_ptr<Communicator> group, const std::string& label,
                                               FlightRecorder& recorder = flight_recorder());

// The mismatch fault's phantom all-reduce on `group`, when it is recorded; -1 otherwise.
int64_t record_phantom_all_reduce(Communicator& group, DType dtype, int64_t numel);

}  // namespace us
