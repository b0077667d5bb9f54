// Writes a hung job's Flight Recorder dumps, one file per rank as PyTorch names them (comm_lib_trace_rank_<r>, in
// PyTorch's pickle format: profiler/flight/flight_writer.h), for the GUI's smoke test and the docs' screenshot of the
// Hang view. The job: dp x tp ranks (tp innermost, 8 ranks a node), each step two tensor-parallel all-reduces
// and one data-parallel all-reduce; at the last step one rank never enters its tp group's all-reduce, so its tp peers
// wait in it and the other tp groups' ranks wait in dp for them (the root and its victims).
//   make_hang_dumps OUT_DIR [--ranks N] [--tp T] [--stop-rank R] [--steps S] [--no-dump R]
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "flight_job.h"
#include "profiler/flight/flight_writer.h"

namespace {

struct Args {
    std::string out;
    int ranks = 16, tp = 4, stop_rank = 6, steps = 12, no_dump = -1;
};

Args parse(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        const std::string k = argv[i];
        auto value = [&] {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "make_hang_dumps: %s needs a value\n", k.c_str());
                std::exit(2);
            }
            return std::atoi(argv[++i]);
        };
        if (k == "--ranks")
            a.ranks = value();
        else if (k == "--tp")
            a.tp = value();
        else if (k == "--stop-rank")
            a.stop_rank = value();
        else if (k == "--steps")
            a.steps = value();
        else if (k == "--no-dump")
            a.no_dump = value();
        else if (k.rfind("-", 0) == 0 || !a.out.empty())  // --help, an unknown flag, a second folder: the usage
            a.out.clear(), i = argc;
        else
            a.out = k;
    }
    if (a.out.empty() || a.tp < 1 || a.ranks % a.tp || a.stop_rank < 0 || a.stop_rank >= a.ranks || a.steps < 2) {
        std::fprintf(stderr,
                     "usage: make_hang_dumps OUT_DIR [--ranks N] [--tp T (divides N)] [--stop-rank R] [--steps S >= 2] "
                     "[--no-dump R]\n");
        std::exit(2);
    }
    return a;
}

// The job, step by step; the last step hangs.
us::test::FlightJob hung_job(const Args& a) {
    const int dp = a.ranks / a.tp;
    us::test::FlightJob job(a.ranks);
    auto tp_ranks = [&](int t) {
        std::vector<int> r;
        for (int i = 0; i < a.tp; ++i) r.push_back(t * a.tp + i);
        return r;
    };
    auto dp_ranks = [&](int d) {
        std::vector<int> r;
        for (int i = 0; i < dp; ++i) r.push_back(i * a.tp + d);
        return r;
    };
    for (int t = 0; t < dp; ++t) job.config("tp" + std::to_string(t), "tp", tp_ranks(t));
    for (int d = 0; d < a.tp; ++d) job.config("dp" + std::to_string(d), "dp", dp_ranks(d));
    const int stuck = a.stop_rank / a.tp;
    for (int step = 0; step < a.steps; ++step) {
        const bool last = step + 1 == a.steps;
        for (int t = 0; t < dp; ++t) {
            std::vector<int> in = tp_ranks(t), waiting;
            if (last && t == stuck) {
                std::erase(in, a.stop_rank);
                job.collective("tp" + std::to_string(t), "tp", in, "nccl:all_reduce", 4096, in, 212);
                continue;
            }
            job.collective("tp" + std::to_string(t), "tp", in, "nccl:all_reduce", 4096, {}, 212);  // attention out
            job.collective("tp" + std::to_string(t), "tp", in, "nccl:all_reduce", 4096, {}, 236);  // mlp out
        }
        for (int d = 0; d < a.tp; ++d) {
            std::vector<int> in;
            for (int r : dp_ranks(d))
                if (!last || r / a.tp != stuck) in.push_back(r);
            job.collective("dp" + std::to_string(d), "dp", in, "nccl:all_reduce", 1 << 20,
                           last ? in : std::vector<int>{},
                           418);  // gradients
        }
    }
    for (auto& d : job.dumps) d.host = "node-" + std::to_string(d.rank / 8);
    return job;
}

}  // namespace

int main(int argc, char** argv) {
    const Args a = parse(argc, argv);
    std::filesystem::create_directories(a.out);
    const us::test::FlightJob job = hung_job(a);
    for (const auto& d : job.dumps) {
        if (d.rank == a.no_dump) continue;
        const std::string path = a.out + "/comm_lib_trace_rank_" + std::to_string(d.rank);
        if (!us::flight::save_flight_dump(d, path)) {
            std::perror(path.c_str());
            return 1;
        }
    }
    std::printf("wrote %d dumps to %s: rank %d stops before its tp group's all-reduce at step %d\n",
                a.ranks - (a.no_dump >= 0 && a.no_dump < a.ranks), a.out.c_str(), a.stop_rank, a.steps);
    return 0;
}
