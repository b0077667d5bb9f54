// How long a point-to-point exchange (the context-parallel ring's: send to the next rank, receive from the
// previous) takes when the caller computes while it is in flight. For blocks of 64 KiB to 8 MiB, through the
// engine's own communicator (MPI, its progress thread): the exchange waited on at once ("alone"), and the exchange
// posted, COMPUTE_US of arithmetic on the calling thread, then the wait ("wait after compute": what a run shows as
// exposed communication). The progress thread polls every 20 us while compute runs and without a pause while the
// caller waits (docs/communication.md). Prints one JSON object per line (rank 0), medians of REPEATS.
//
//   mpirun -n 2 build/bin/bench_p2p_overlap [compute_us] [repeats]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "engine/comm/mpi_comm.h"

using namespace us;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Arithmetic on this thread for `us` microseconds (the compute a transfer hides behind).
double compute_for(double us) {
    const auto t0 = Clock::now();
    double x = 1.0;
    while (seconds_since(t0) * 1e6 < us)
        for (int i = 0; i < 256; ++i) x = x * 1.0000001 + 1e-9;
    return x;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    MpiRuntime::init(&argc, &argv, "thread");
    const double compute_us = argc > 1 ? std::max(0.0, std::atof(argv[1])) : 600.0;
    const int repeats = argc > 2 ? std::max(3, std::atoi(argv[2])) : 30;
    {
        auto ring = MpiRuntime::world(GroupKind::cp);
        const int n = ring->size(), me = ring->rank();
        const int next = (me + 1) % n, prev = (me + n - 1) % n;
        double sink = 0;
        for (int64_t bytes = 64 << 10; bytes <= (int64_t(8) << 20); bytes *= 2) {
            const int64_t elements = bytes / 4;
            std::vector<float> out(size_t(elements), 1.0f), in(size_t(elements), 0.0f);
            const Tensor send = Tensor::of(out.data(), elements), recv = Tensor::of(in.data(), elements);
            std::vector<double> alone, wait, whole;
            for (int k = 0; k < repeats + 3; ++k) {
                ring->barrier();
                auto t0 = Clock::now();
                auto [s, r] = ring->isend_recv(send, next, recv, prev, 7);
                s->wait(), r->wait();
                const double a = seconds_since(t0);
                ring->barrier();
                t0 = Clock::now();
                auto [s2, r2] = ring->isend_recv(send, next, recv, prev, 8);
                sink += compute_for(compute_us);
                const auto t1 = Clock::now();
                s2->wait(), r2->wait();
                const double w = seconds_since(t1), all = seconds_since(t0);
                if (k >= 3) alone.push_back(a), wait.push_back(w), whole.push_back(all);  // after warm-up
            }
            if (me == 0)
                fmt::print(
                    "{{\"op\": \"send_recv\", \"ranks\": {}, \"bytes\": {}, \"compute_us\": {:.0f}, \"alone_s\": {:.9f}, "
                    "\"wait_after_compute_s\": {:.9f}, \"whole_s\": {:.9f}}}\n",
                    n, bytes, compute_us, median(alone), median(wait), median(whole));
        }
        if (sink == 0) fmt::print("\n");  // keeps the arithmetic
    }
    MpiRuntime::finalize();
    return 0;
}
