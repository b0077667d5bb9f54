// The Communicator: collectives and point-to-point transfers within one process group, blocking or async with a
// handle. One communicator per group (world, dp, pp, ...), built once by the ProcessGrid. Every call records a
// span on the comm lane (p2p lane for send/recv) with its op, group and bytes, from launch to completion.
// Implementations: MPI over host memory (mpi_comm.cpp) and, on GPUs, NCCL (nccl_comm.cpp). A group of size 1 makes
// every collective a local no-op (or copy).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/core/tensor.h"
#include "profiler/event.h"

namespace us {

// One in-flight operation. wait() returns once the operation's result is visible to the backend's later work: on
// the host (MPI) it blocks until completion; on a GPU (NCCL) it makes the compute stream wait and returns at once,
// so a host read of the buffer must go through the backend (download synchronises). test() never blocks.
class CommRequest {
public:
    virtual ~CommRequest() = default;
    virtual bool test() = 0;
    virtual void wait() = 0;
};
using CommHandle = std::shared_ptr<CommRequest>;

// A handle that is already complete (size-1 groups, empty buffers).
CommHandle completed_handle();

// The reduction of an all-reduce: sums (gradients, partial products) or maxima (the vocabulary-parallel softmax).
enum class ReduceOp : uint8_t { sum, max };

// The kinds of process group, and their names, are the trace's (profiler/event.h): spans carry the kind's number.
using prof::GroupKind;
using prof::group_kind_name;

class Communicator {
public:
    virtual ~Communicator() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual GroupKind kind() const = 0;
    // The world rank of this group's rank r (for peers in messages and spans).
    virtual int world_rank_of(int r) const = 0;
    // The library that carries the group's tensors, as flight recorder dumps name it ("mpi", "nccl").
    virtual const char* library() const { return "mpi"; }

    // ---- async (sum reductions unless told; fp32 or bf16 tensors; bf16 sums are computed in fp32 per pair and
    // rounded)
    virtual CommHandle iall_reduce(Tensor buf, ReduceOp op) = 0;
    CommHandle iall_reduce(Tensor buf) { return iall_reduce(buf, ReduceOp::sum); }
    // send holds the whole range; rank r's piece [displs[r], displs[r] + counts[r]) of the sum lands in recv.
    virtual CommHandle ireduce_scatter(Tensor send, Tensor recv, const std::vector<int>& counts,
                                       const std::vector<int>& displs) = 0;
    // In place: rank r's piece is at buf[displs[r] .. + counts[r]); afterwards every rank has every piece.
    virtual CommHandle iall_gather(Tensor buf, const std::vector<int>& counts, const std::vector<int>& displs) = 0;
    virtual CommHandle ibroadcast(Tensor buf, int root) = 0;
    virtual CommHandle isend(Tensor buf, int peer, int tag) = 0;
    virtual CommHandle irecv(Tensor buf, int peer, int tag) = 0;
    virtual CommHandle iall_to_all(Tensor send, Tensor recv) = 0;
    // Variable all-to-all: send holds, back to back, send_counts[r] elements for each rank r; recv receives
    // recv_counts[r] elements from each rank r, back to back (expert parallelism's token exchange).
    virtual CommHandle iall_to_allv(Tensor send, const std::vector<int>& send_counts, Tensor recv,
                                    const std::vector<int>& recv_counts) = 0;
    // A ring step: `send` to rank `to` and `recv` from rank `from` as one exchange. NCCL groups the two so that
    // every rank of a ring can post its pair at once; elsewhere it is a send and a receive. Returns the send's
    // handle and the receive's.
    virtual std::pair<CommHandle, CommHandle> isend_recv(Tensor send, int to, Tensor recv, int from, int tag) {
        return {isend(send, to, tag), irecv(recv, from, tag)};
    }
    virtual CommHandle ibarrier() = 0;

    // ---- blocking forms. An implementation may run them on the calling thread (MPI does, when nothing else of the
    // group is in flight: it saves the progress thread's hand-off on the critical path).
    virtual void all_reduce(Tensor buf, ReduceOp op = ReduceOp::sum) { iall_reduce(buf, op)->wait(); }
    virtual void reduce_scatter(Tensor send, Tensor recv, const std::vector<int>& counts,
                                const std::vector<int>& displs) {
        ireduce_scatter(send, recv, counts, displs)->wait();
    }
    virtual void all_gather(Tensor buf, const std::vector<int>& counts, const std::vector<int>& displs) {
        iall_gather(buf, counts, displs)->wait();
    }
    void broadcast(Tensor buf, int root) { ibroadcast(buf, root)->wait(); }
    void send(Tensor buf, int peer, int tag) { isend(buf, peer, tag)->wait(); }
    void recv(Tensor buf, int peer, int tag) { irecv(buf, peer, tag)->wait(); }
    void all_to_all(Tensor send, Tensor recv) { iall_to_all(send, recv)->wait(); }
    void all_to_allv(Tensor send, const std::vector<int>& send_counts, Tensor recv,
                     const std::vector<int>& recv_counts) {
        iall_to_allv(send, send_counts, recv, recv_counts)->wait();
    }
    void barrier() { ibarrier()->wait(); }

    // Scalars (host doubles), blocking: losses, norms.
    virtual double all_reduce_sum(double value) = 0;
    virtual double all_reduce_max(double value) = 0;
    // Host bytes, blocking (checkpoint shards, clock estimation, expert parallelism's row counts).
    virtual void all_gather_bytes(const void* send, size_t bytes_per_rank, void* recv) = 0;
    // send holds bytes_per_rank bytes for each rank in turn; recv receives as much from each.
    virtual void all_to_all_bytes(const void* send, size_t bytes_per_rank, void* recv) = 0;
};

// A process group of one: every collective is local.
std::unique_ptr<Communicator> make_local_communicator(GroupKind kind);

}  // namespace us
