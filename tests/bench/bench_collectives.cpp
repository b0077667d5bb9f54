// The cost of one collective on this machine, through the engine's own communicator (MPI, its progress thread):
// for all-reduce, all-gather and reduce-scatter of fp32 buffers from 4 KiB to 8 MiB, the median time of repeated
// calls. Prints one JSON object per line (rank 0), which tests/bench/bench_tp.py fits to time = alpha + beta * bytes
// sent (ring algorithms) to predict the exposed time of tensor-parallel communication.
//
//   mpirun -n 2 build/bin/bench_collectives [repeats]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "engine/comm/mpi_comm.h"

using namespace us;

int main(int argc, char** argv) {
    MpiRuntime::init(&argc, &argv, "thread");
    const int repeats = argc > 1 ? std::max(3, std::atoi(argv[1])) : 30;
    {
        auto world = MpiRuntime::world(GroupKind::tp);
        const int n = world->size(), me = world->rank();
        for (int64_t bytes = 4096; bytes <= (int64_t(8) << 20); bytes *= 2) {
            const int64_t elements = bytes / 4;
            std::vector<float> buffer(size_t(elements), 1.0f), piece(size_t(elements / n));
            const Tensor whole = Tensor::of(buffer.data(), elements), mine = Tensor::of(piece.data(), elements / n);
            std::vector<int> counts(static_cast<size_t>(n), int(elements / n)), displs(static_cast<size_t>(n));
            for (int r = 0; r < n; ++r) displs[size_t(r)] = r * int(elements / n);
            for (const char* op : {"all_reduce", "all_gather", "reduce_scatter"}) {
                std::vector<double> times;
                for (int k = 0; k < repeats + 3; ++k) {
                    world->barrier();
                    const auto t0 = std::chrono::steady_clock::now();
                    if (op[4] == 'r')
                        world->all_reduce(whole);
                    else if (op[4] == 'g')
                        world->all_gather(whole, counts, displs);
                    else
                        world->reduce_scatter(whole, mine, counts, displs);
                    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                    if (k >= 3) times.push_back(s);  // the first calls warm the transport up
                }
                std::sort(times.begin(), times.end());
                if (me == 0)
                    fmt::print(
                        "{{\"op\": \"{}\", \"ranks\": {}, \"bytes\": {}, \"median_s\": {:.9f}, \"min_s\": {:.9f}}}\n",
                        op, n, bytes, times[times.size() / 2], times.front());
                std::fflush(stdout);  // a line as each is measured: `ultrascope calibrate` reads it as progress
            }
        }
    }
    MpiRuntime::finalize();
    return 0;
}
