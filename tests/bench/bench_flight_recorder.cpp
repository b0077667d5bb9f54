// What the flight recorder (engine/comm/flight_recorder.h) costs a collective: the same blocking all-reduce, and the
// same async one waited on, through the group's MPI communicator as is and through the recording communicator
// around it, calls of the two interleaved so that both see the same machine; the median of each and the
// difference. Then the recorder alone: record + started + completed of one entry, and a dump of a full ring.
//
//   mpirun -n 2 build/bin/bench_flight_recorder [repeats]
#include <fmt/format.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "engine/comm/flight_recorder.h"
#include "engine/comm/mpi_comm.h"
#include "engine/comm/recording_comm.h"
#include "profiler/flight/flight_writer.h"

using namespace us;

namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

template <typename Call>
double seconds_of(Call&& call) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// This thread's CPU time: on a machine shared with other work the wall clock counts their time too.
template <typename Call>
double cpu_seconds_of(Call&& call) {
    timespec a{}, b{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    call();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    return double(b.tv_sec - a.tv_sec) + double(b.tv_nsec - a.tv_nsec) * 1e-9;
}

// The recorder alone, one process: CPU nanoseconds per entry (record, started, completed), and one full ring's dump.
void recorder_alone(int me) {
    FlightRecorderOptions o;
    o.capacity = 2000;
    FlightRecorder recorder(o);
    const int g = recorder.add_group("dp:0", "dp", {0, 1}, "mpi", 0);
    const int n = 1000000;
    const double s = cpu_seconds_of([&] {
        for (int i = 0; i < n; ++i) {
            const int64_t id = recorder.record(g, {FlightOp::all_reduce, 1024, 1024});
            recorder.started(id);
            recorder.completed(id);
        }
    });
    size_t bytes = 0;
    const double dump_s = cpu_seconds_of([&] { bytes = flight::write_flight_dump(recorder.snapshot()).size(); });
    if (me == 0)
        fmt::print(
            "{{\"what\": \"recorder alone (CPU time)\", \"ns_per_entry\": {:.1f}, \"dump_of_2000_ms\": {:.2f}, "
            "\"dump_bytes\": {}}}\n",
            s / n * 1e9, dump_s * 1e3, bytes);
}

}  // namespace

int main(int argc, char** argv) {
    MpiRuntime::init(&argc, &argv, "thread");
    const int repeats = argc > 1 ? std::max(11, std::atoi(argv[1])) : 2001;
    {
        FlightRecorderOptions o;
        o.capacity = 2000;
        flight_recorder().configure(o);
        auto plain_group = MpiRuntime::world(GroupKind::dp);
        Communicator* raw = plain_group.get();
        std::unique_ptr<Communicator> recorded = record_in_flight(MpiRuntime::world(GroupKind::dp), "dp");
        const int me = raw->rank();
        for (int64_t bytes : {int64_t(4096), int64_t(65536), int64_t(1) << 20}) {
            std::vector<float> buffer(size_t(bytes / 4), 1.0f);
            const Tensor t = Tensor::of(buffer.data(), bytes / 4);
            for (const bool async : {false, true}) {
                std::vector<double> plain_s, recorded_s;
                for (int k = 0; k < repeats + 10; ++k) {
                    Communicator& c = k % 2 ? *recorded : *raw;
                    raw->barrier();
                    const double s = seconds_of([&] {
                        if (async)
                            c.iall_reduce(t)->wait();
                        else
                            c.all_reduce(t);
                    });
                    if (k >= 10) (k % 2 ? recorded_s : plain_s).push_back(s);
                }
                const double p = median(plain_s), r = median(recorded_s);
                if (me == 0)
                    fmt::print(
                        "{{\"op\": \"{}\", \"bytes\": {}, \"plain_us\": {:.2f}, \"recorded_us\": {:.2f}, "
                        "\"overhead_us\": {:.2f}, \"overhead_pct\": {:.1f}}}\n",
                        async ? "iall_reduce + wait" : "all_reduce", bytes, p * 1e6, r * 1e6, (r - p) * 1e6,
                        (r - p) / p * 100);
            }
        }
        recorder_alone(me);
    }
    MpiRuntime::finalize();
    return 0;
}
