// The engine's flight recorder, after PyTorch's (TORCH_FR_BUFFER_SIZE): a ring of this process's last N collectives
// and point-to-point operations over every process group, each with its group, its sequence number in the group
// (collectives and p2p counted apart), what it moved, how far it got (scheduled, started, completed, with times)
// and where the engine called it (flight_frames.h). Recording is a few stores into a preallocated slot under an
// uncontended lock: no allocation per operation. A dump (snapshot(), written by flight_writer.h) is what
// `ultrascope report` and PyTorch's analyzer read to name what holds a hung run (docs/engine-flight-recorder.md).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common/core/dtype.h"
#include "engine/comm/communicator.h"
#include "engine/comm/flight_frames.h"
#include "profiler/flight/flight_dump.h"

namespace us {

enum class FlightOp : uint8_t { all_reduce, reduce_scatter, all_gather, broadcast, all_to_all, barrier, send, recv };
const char* flight_op_name(FlightOp op);

// Element types as PyTorch names them in dumps ("Float", "BFloat16", ...).
enum class FlightDType : uint8_t { float32, bfloat16, int32, float64, byte };
FlightDType flight_dtype(DType t);
const char* flight_dtype_name(FlightDType t);

// One operation as the caller made it: one tensor in and one out, by element count.
struct FlightCall {
    FlightOp op = FlightOp::all_reduce;
    int64_t in_numel = 0, out_numel = 0;
    FlightDType dtype = FlightDType::float32;
    int peer = -1;  // p2p: the other side, a rank of the group
};

struct FlightRecorderOptions {
    int capacity = 2000;  // entries kept (0: the recorder is off)
    int rank = 0;         // global rank
    std::string host;
    int64_t timeout_ms = 0;  // written in each entry: the limit the rank's watchdog applies
    std::string comm_lib_version;
    std::string injected_fault;  // an injected hang's description ("" for none): labels every dump
};

class FlightRecorder {
public:
    FlightRecorder() = default;
    explicit FlightRecorder(const FlightRecorderOptions& options) { configure(options); }
    // Sizes the ring (before any group is added).
    void configure(const FlightRecorderOptions& options);
    bool enabled() const { return m_capacity > 0; }
    const FlightRecorderOptions& options() const { return m_options; }

    // A process group: its name (unique in the job, the same on every member), its kind ("dp", "tp" ...), its
    // members' global ranks in group order, the library that carries it ("mpi", "nccl") and this rank's place.
    int add_group(const std::string& name, const std::string& desc, std::vector<int> ranks, const std::string& library,
                  int group_rank);

    // An operation called now (scheduled). Returns its record id, -1 when the recorder is off.
    int64_t record(int group, const FlightCall& call);
    // It was handed to the library (started), and seen complete (completed). Ids the ring has overwritten are
    // ignored.
    void started(int64_t id);
    void completed(int64_t id);

    // A handle dropped before its completion was seen (a GPU's operations complete after wait() returns): the
    // watchdog polls it (poll_unfinished, also before each dump) until it completes.
    void watch_unfinished(int64_t id, CommHandle handle);
    void poll_unfinished();

    // The training loop's steps, for the watchdog: a step that runs past the limit is a stall too.
    void begin_step(int step);
    void end_steps();
    // What has been stuck longer than `limit_s`: the oldest operation not completed, else the step; "" when
    // nothing. `key` identifies the stall (so a watchdog dumps once per stall).
    std::string stall(double limit_s, int64_t& key) const;

    // The dump: every group and the entries the ring holds, oldest first.
    flight::FlightDump snapshot() const;
    int64_t recorded() const;  // operations recorded so far (all time)

private:
    struct Group {
        std::string name, desc, library;
        std::vector<int> ranks;
        int group_rank = 0;
        int64_t collective_seq = 0, p2p_seq = 0, op_id = 0;
    };
    // One entry; plain data, copied whole into a dump.
    struct Slot {
        int64_t record_id = -1;
        int64_t collective_seq = 0, p2p_seq = 0, op_id = 0;
        int64_t created_ns = 0, started_ns = -1, completed_ns = -1;
        int64_t in_numel = 0, out_numel = 0;
        int32_t step = 0, peer = -1;
        int16_t micro_batch = -1;
        uint16_t group = 0;
        FlightOp op = FlightOp::all_reduce;
        FlightDType dtype = FlightDType::float32;
        flight::EntryState state = flight::EntryState::scheduled;
        uint8_t depth = 0;
        static constexpr int kFrames = 8;
        const FlightSite* frames[kFrames] = {};  // innermost first
    };
    Slot* slot_of(int64_t id);
    void add_entry(flight::FlightDump& dump, flight::FlightDumpBuilder& build, const Group& g, uint32_t group_id,
                   const Slot& s) const;

    FlightRecorderOptions m_options;
    int m_capacity = 0;
    mutable std::mutex m_mutex;
    std::vector<Slot> m_ring;
    std::vector<Group> m_groups;
    int64_t m_next_id = 0;
    std::mutex m_unfinished_mutex;
    std::vector<std::pair<int64_t, CommHandle>> m_unfinished;
    std::atomic<int> m_step{0};
    std::atomic<int64_t> m_step_began_ns{0};  // 0: not inside a step
};

// The process's recorder (configured by the training session; off until then).
FlightRecorder& flight_recorder();

// CLOCK_REALTIME in nanoseconds: PyTorch's entries carry wall-clock times, comparable across hosts.
int64_t flight_now_ns();

}  // namespace us
