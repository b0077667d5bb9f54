// The engine's flight recorder (engine/comm/flight_recorder.h, recording_comm.h): the ring wraps and keeps the newest
// entries, sequence numbers count per group with collectives and p2p apart, entries go scheduled -> started ->
// completed as the library and the waits see them, the engine's frames land innermost first with the step, and a
// dump round-trips through the writer (PyTorch's pickle) and the plain pickle reader key for key.
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/comm/flight_frames.h"
#include "engine/comm/flight_recorder.h"
#include "engine/comm/recording_comm.h"
#include "profiler/flight/flight_writer.h"
#include "profiler/plain/pickle_reader.h"
#include "profiler/record/zones.h"
#include "test_util.h"

using namespace us;

namespace {

// A request that completes when the test says so (or when waited on, as a blocking library would).
struct ManualRequest final : CommRequest {
    bool done = false;
    bool test() override { return done; }
    void wait() override { done = true; }
};

// A group of two ranks (this one is group rank `me`, world ranks base and base + stride) whose operations do nothing
// and complete when waited on; the last request is kept for the test to complete.
class FakeGroup final : public Communicator {
public:
    FakeGroup(int me, int base, int stride, GroupKind kind = GroupKind::dp)
        : m_me(me), m_base(base), m_stride(stride), m_kind(kind) {}
    int rank() const override { return m_me; }
    int size() const override { return 2; }
    GroupKind kind() const override { return m_kind; }
    int world_rank_of(int r) const override { return m_base + r * m_stride; }
    CommHandle iall_reduce(Tensor, ReduceOp) override { return next(); }
    CommHandle ireduce_scatter(Tensor, Tensor, const std::vector<int>&, const std::vector<int>&) override {
        return next();
    }
    CommHandle iall_gather(Tensor, const std::vector<int>&, const std::vector<int>&) override { return next(); }
    CommHandle ibroadcast(Tensor, int) override { return next(); }
    CommHandle isend(Tensor, int, int) override { return next(); }
    CommHandle irecv(Tensor, int, int) override { return next(); }
    CommHandle iall_to_all(Tensor, Tensor) override { return next(); }
    CommHandle iall_to_allv(Tensor, const std::vector<int>&, Tensor, const std::vector<int>&) override {
        return next();
    }
    CommHandle ibarrier() override { return next(); }
    double all_reduce_sum(double v) override { return 2 * v; }
    double all_reduce_max(double v) override { return v; }
    void all_gather_bytes(const void*, size_t, void*) override {}
    void all_to_all_bytes(const void*, size_t, void*) override {}
    std::shared_ptr<ManualRequest> last;

private:
    CommHandle next() { return last = std::make_shared<ManualRequest>(); }
    int m_me, m_base, m_stride;
    GroupKind m_kind;
};

FlightRecorderOptions options(int capacity) {
    FlightRecorderOptions o;
    o.capacity = capacity;
    o.rank = 3;
    o.host = "node-a";
    o.timeout_ms = 5000;
    o.comm_lib_version = "test MPI";
    return o;
}

float g_buffer[64];
Tensor floats(int64_t n) { return Tensor::of(g_buffer, n); }

}  // namespace

TEST_CASE("flight recorder: the ring keeps the newest entries, oldest first", "[cpu][flight]") {
    FlightRecorder recorder(options(4));
    const int g = recorder.add_group("dp:0", "dp", {0, 2}, "mpi", 1);
    for (int i = 0; i < 10; ++i) recorder.completed(recorder.record(g, {FlightOp::all_reduce, 8, 8}));
    const flight::FlightDump d = recorder.snapshot();
    REQUIRE(d.entries.size() == 4);
    for (size_t i = 0; i < 4; ++i) {
        CHECK(d.entries[i].record_id == int64_t(6 + i));
        CHECK(d.entries[i].collective_seq_id == int64_t(7 + i));  // counted from 1, as PyTorch does
        CHECK(d.entries[i].state == flight::EntryState::completed);
        CHECK(d.entries[i].retired);
    }
    CHECK(recorder.recorded() == 10);
    recorder.started(2);  // overwritten long ago: ignored
    CHECK(recorder.snapshot().entries.front().record_id == 6);
}

TEST_CASE("flight recorder: sequence numbers per group, collectives and p2p apart", "[cpu][flight]") {
    FlightRecorder recorder(options(16));
    const int dp = recorder.add_group("dp:0", "dp", {0, 2}, "mpi", 0);
    const int pp = recorder.add_group("pp:0", "pp", {0, 1}, "mpi", 0);
    recorder.record(dp, {FlightOp::all_reduce, 8, 8});
    recorder.record(pp, {FlightOp::send, 4, 4, FlightDType::float32, 1});
    recorder.record(dp, {FlightOp::all_reduce, 8, 8});
    recorder.record(pp, {FlightOp::recv, 4, 4, FlightDType::float32, 1});
    recorder.record(pp, {FlightOp::all_reduce, 1, 1, FlightDType::float64});
    const flight::FlightDump d = recorder.snapshot();
    REQUIRE(d.entries.size() == 5);
    auto seq = [&](size_t i) {
        const flight::FlightEntry& e = d.entries[i];
        return std::vector<int64_t>{e.collective_seq_id, e.p2p_seq_id, e.op_id};
    };
    CHECK(seq(0) == std::vector<int64_t>{1, 0, 1});
    CHECK(seq(1) == std::vector<int64_t>{0, 1, 1});
    CHECK(seq(2) == std::vector<int64_t>{2, 0, 2});
    CHECK(seq(3) == std::vector<int64_t>{0, 2, 2});
    CHECK(seq(4) == std::vector<int64_t>{1, 2, 3});
    CHECK(d.op_name(d.entries[1]) == "mpi:send 0->1");  // PyTorch's names, group ranks
    CHECK(d.op_name(d.entries[3]) == "mpi:recv 0<-1");
    CHECK(d.entries[1].is_p2p);
    CHECK(d.entries[1].peer == 1);
    CHECK(d.group_name(d.entries[1].group) == "pp:0");
    CHECK(d.group_desc(d.entries[1].group) == "pp");
    CHECK(d.text(d.shapes[d.entries[4].shapes].input_dtypes[0]) == "Double");
    REQUIRE(d.pg_config.size() == 2);
    CHECK(d.pg_config[0].ranks == std::vector<int>{0, 2});
}

TEST_CASE("flight recorder: scheduled, started, completed through the recording communicator", "[cpu][flight]") {
    FlightRecorder recorder(options(16));
    auto fake = std::make_unique<FakeGroup>(1, 4, 8);
    FakeGroup* inner = fake.get();
    std::unique_ptr<Communicator> group = record_in_flight(std::move(fake), "dp", recorder);
    CommHandle h = group->iall_reduce(floats(16));
    flight::FlightDump d = recorder.snapshot();
    REQUIRE(d.entries.size() == 1);
    CHECK(d.entries[0].state == flight::EntryState::started);  // handed to the library, not seen complete
    CHECK(d.entries[0].time_started_ns >= d.entries[0].time_created_ns);
    CHECK(d.entries[0].time_completed_ns == -1);
    CHECK_FALSE(h->test());
    inner->last->done = true;
    CHECK(h->test());
    d = recorder.snapshot();
    CHECK(d.entries[0].state == flight::EntryState::completed);
    CHECK(d.entries[0].time_completed_ns >= d.entries[0].time_started_ns);
    CHECK(d.group_name(d.entries[0].group) == "dp:4");  // the label and the group's lowest world rank
    CHECK(d.pg_config[0].ranks == std::vector<int>{4, 12});
    // blocking forms complete when they return; a handle dropped unfinished is polled later
    CHECK(group->all_reduce_sum(1.5) == 3.0);
    CommHandle dropped = group->isend(floats(4), 0, 7);
    std::shared_ptr<ManualRequest> unfinished = inner->last;
    dropped.reset();
    d = recorder.snapshot();
    REQUIRE(d.entries.size() == 3);
    CHECK(d.entries[1].state == flight::EntryState::completed);
    CHECK(d.op_name(d.entries[2]) == "mpi:send 1->0");
    CHECK(d.entries[2].state == flight::EntryState::started);
    unfinished->done = true;
    recorder.poll_unfinished();
    CHECK(recorder.snapshot().entries[2].state == flight::EntryState::completed);
    // the mismatch fault's entry: recorded as entered, the library never called
    CHECK(record_phantom_all_reduce(*group, DType::bf16, 12) >= 0);
    d = recorder.snapshot();
    CHECK(d.entries.back().state == flight::EntryState::started);
    CHECK(d.shapes[d.entries.back().shapes].input_sizes == std::vector<std::vector<int64_t>>{{12}});
    CHECK(d.text(d.shapes[d.entries.back().shapes].input_dtypes[0]) == "BFloat16");
}

TEST_CASE("flight recorder: groups of one rank and a recorder that is off record nothing", "[cpu][flight]") {
    FlightRecorder off(options(0));
    auto fake = std::make_unique<FakeGroup>(0, 0, 1);
    Communicator* raw = fake.get();
    CHECK(record_in_flight(std::move(fake), "dp", off).get() == raw);  // unchanged
    FlightRecorder on(options(8));
    std::unique_ptr<Communicator> one = make_local_communicator(GroupKind::tp);
    Communicator* local = one.get();
    CHECK(record_in_flight(std::move(one), "tp", on).get() == local);
    CHECK(on.snapshot().pg_config.empty());
}

TEST_CASE("flight recorder: entries carry the engine's frames, innermost first, with the step", "[cpu][flight]") {
    FlightRecorder recorder(options(8));
    const int g = recorder.add_group("tp:0", "tp", {0, 1}, "mpi", 0);
    {
        US_PROF_STEP(12);
        US_FLIGHT_FRAME("Trainer::train_step", FrameDetail::step);
        US_PROF_PHASE(prof::Phase::backward, 3);
        US_FLIGHT_FRAME("PipelineExecutor::backward", FrameDetail::micro_batch);
        US_FLIGHT_FRAME("TensorParallel::copy_to_tp_region (backward)", FrameDetail::none);
        recorder.record(g, {FlightOp::all_reduce, 8, 8});
    }
    recorder.record(g, {FlightOp::all_reduce, 8, 8});  // outside every scope: no frames
    const flight::FlightDump d = recorder.snapshot();
    const std::vector<flight::Frame>& frames = d.stacks[d.entries[0].stack];
    REQUIRE(frames.size() == 3);
    CHECK(d.text(frames[0].name) == "TensorParallel::copy_to_tp_region (backward)");
    CHECK(d.text(frames[1].name) == "PipelineExecutor::backward (step 12, micro-batch 3)");
    CHECK(d.text(frames[2].name) == "Trainer::train_step (step 12)");
    CHECK(d.text(frames[0].file) == "tests/unit/test_flight_recorder.cpp");
    CHECK(frames[0].line > frames[2].line);
    CHECK(d.stacks[d.entries[1].stack].empty());
}

TEST_CASE("flight recorder: a dump round-trips through PyTorch's pickle and the plain reader", "[cpu][flight]") {
    FlightRecorderOptions o = options(8);
    o.injected_fault = "injected hang: rank 3 stops calling collectives at step 2";
    FlightRecorder recorder(o);
    const int g = recorder.add_group("pp:0", "pp", {0, 3}, "mpi", 1);
    const int64_t id = recorder.record(g, {FlightOp::recv, 6, 6, FlightDType::bfloat16, 0});
    recorder.started(id);
    const std::string bytes = flight::write_flight_dump(recorder.snapshot());
    const plain::PlainData p = plain::read_pickle(bytes, "dump");
    auto text = [&](plain::ValueId dict, const char* key) {
        std::string_view s;
        REQUIRE(p.get_string(p.find(dict, key), s));
        return std::string(s);
    };
    auto integer = [&](plain::ValueId dict, const char* key) {
        int64_t v = 0;
        REQUIRE(p.get_int(p.find(dict, key), v));
        return v;
    };
    CHECK(text(p.root, "version") == "2.10");
    CHECK(integer(p.root, "rank") == 3);
    CHECK(text(p.root, "host") == "node-a");
    CHECK(text(p.root, "comm_lib_version") == "test MPI");
    CHECK(text(p.find(p.root, "ultrascope"), "injected_fault") == o.injected_fault);
    const plain::ValueId group = p.find(p.find(p.root, "pg_config"), "pp:0");
    CHECK(text(group, "desc") == "pp");
    CHECK(text(group, "ranks") == "[0, 3]");
    const auto entries = p.items(p.find(p.root, "entries"));
    REQUIRE(entries.size() == 1);
    const plain::ValueId e = entries[0];
    CHECK(text(e, "profiling_name") == "mpi:recv 1<-0");
    CHECK(text(e, "state") == "started");
    CHECK(integer(e, "p2p_seq_id") == 1);
    CHECK(integer(e, "collective_seq_id") == 0);
    CHECK(integer(e, "timeout_ms") == 5000);
    CHECK(p.kind(p.find(e, "time_discovered_completed_ns")) == plain::PlainKind::none);
    CHECK(p.kind(p.find(e, "is_p2p")) == plain::PlainKind::boolean);
    const auto pg = p.items(p.find(e, "process_group"));
    REQUIRE(pg.size() == 2);
    std::string_view name;
    CHECK((p.get_string(pg[0], name) && name == "pp:0"));
    const auto sizes = p.items(p.find(e, "input_sizes"));
    REQUIRE(sizes.size() == 1);
    int64_t n = 0;
    CHECK((p.get_int(p.items(sizes[0])[0], n) && n == 6));
    std::string_view dtype;
    CHECK((p.get_string(p.items(p.find(e, "input_dtypes"))[0], dtype) && dtype == "BFloat16"));
}

TEST_CASE("flight recorder: the watchdog's stalls, an operation first, then the step", "[cpu][flight]") {
    FlightRecorder recorder(options(8));
    const int g = recorder.add_group("dp:0", "dp", {0, 1}, "mpi", 0);
    int64_t key = 0;
    CHECK(recorder.stall(0.05, key).empty());
    recorder.begin_step(4);
    const int64_t id = recorder.record(g, {FlightOp::all_reduce, 8, 8});
    CHECK(recorder.stall(60, key).empty());
    std::this_thread::sleep_for(std::chrono::milliseconds(80));
    const std::string op = recorder.stall(0.05, key);
    CHECK(op.find("all_reduce on dp:0") != std::string::npos);
    CHECK(key == id);
    recorder.completed(id);
    const std::string step = recorder.stall(0.05, key);
    CHECK(step.find("step 4 has run for") != std::string::npos);
    CHECK(key < 0);
    recorder.end_steps();
    CHECK(recorder.stall(0.05, key).empty());
}
