// Hung jobs at scale (docs/hangs.md): writes RANKS Flight Recorder dumps of ENTRIES entries each, as PyTorch writes
// them (pickles with 10-frame stacks; ring buffers wrapped at different records), of a tp 8 x dp job in which one
// rank stops before its tp all-reduce: its tp peers wait inside it, the other tp groups go on into their dp
// reduce-scatter and wait there. Then analyses them as `ultrascope report DIR` does, in a child process (its peak RSS
// is the analysis's alone), and prints the time, the peak RSS, the bytes read per second and whether the stopped
// rank is named. With PyTorch's analyzer at hand (ULTRASCOPE_TORCH_PYTHON, or a python3 with torch), it is
// run on the same files, side by side, with its time and whether it names the rank.
//   bench_hang [RANKS=4096] [ENTRIES=2000] [DIR=/tmp/ultrascope-bench-hang] [STOPPED_RANK=RANKS/3]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "bench_timing.h"
#include "profiler/flight/flight_writer.h"
#include "profiler/hang/hang_analysis.h"

namespace {

namespace fs = std::filesystem;
using us::flight::FlightDump;
using us::flight::FlightDumpBuilder;
using us::flight::FlightEntry;

constexpr int kTp = 8;
constexpr int kPerStep = 5;  // tp all-reduce x 3, dp reduce-scatter, the loss's all-reduce

struct Job {
    int ranks = 0, entries = 0, stopped = 0;
    int steps() const { return (entries + 8) / kPerStep + 1; }
};

// One rank's dump: every step's calls, up to where the job stopped for it; the ring keeps the newest `entries`.
FlightDump make_dump(const Job& job, int rank) {
    FlightDump d;
    d.rank = rank;
    d.version = "2.10";
    d.comm_lib_version = "2.21.5";
    FlightDumpBuilder b(d);
    const int tp_group = rank / kTp, dp_group = rank % kTp, tp_groups = job.ranks / kTp;
    const uint32_t world = b.group("0", "default_pg");
    const uint32_t tp = b.group(std::to_string(1 + tp_group), "tp");
    const uint32_t dp = b.group(std::to_string(1 + tp_groups + dp_group), "dp");
    // pg_config names each of the rank's groups with its ranks, as NCCL's dumps do.
    d.pg_config.push_back({"0", "default_pg", {}});
    for (int r = 0; r < job.ranks; ++r) d.pg_config.back().ranks.push_back(r);
    d.pg_config.push_back({std::to_string(1 + tp_group), "tp", {}});
    for (int r = tp_group * kTp; r < (tp_group + 1) * kTp; ++r) d.pg_config.back().ranks.push_back(r);
    d.pg_config.push_back({std::to_string(1 + tp_groups + dp_group), "dp", {}});
    for (int r = dp_group; r < job.ranks; r += kTp) d.pg_config.back().ranks.push_back(r);
    auto stack = [&](int site) {
        std::vector<us::flight::Frame> frames;
        const char* names[] = {"all_reduce", "reduce_scatter_tensor",
                               "forward",    "backward",
                               "_call_impl", "train_step",
                               "run",        "main",
                               "<module>",   "wrapper"};
        for (int f = 0; f < 10; ++f)
            frames.push_back({b.string(names[(f + site) % 10]),
                              b.string(f < 2 ? "torch/distributed/distributed_c10d.py" : "megatron/training.py"),
                              100 + 17 * f + site});
        return b.stack(std::move(frames));
    };
    const uint32_t tp_shapes =
        b.shapes({{{4096, 1024}}, {{4096, 1024}}, {b.string("BFloat16")}, {b.string("BFloat16")}});
    const uint32_t dp_shapes = b.shapes({{{1 << 20}}, {{(1 << 20) / 8}}, {b.string("Float")}, {b.string("Float")}});
    const uint32_t loss_shapes = b.shapes({{{1}}, {{1}}, {b.string("Float")}, {b.string("Float")}});
    const uint32_t all_reduce = b.string("nccl:all_reduce"), reduce_scatter = b.string("nccl:_reduce_scatter_base");
    int64_t seq[3] = {0, 0, 0}, record = 0;
    const bool stopped_tp = tp_group == job.stopped / kTp;
    const int last = job.steps() - 1;
    auto add = [&](uint32_t group, int64_t& s, uint32_t op, uint32_t shapes, int site, bool done) {
        FlightEntry e;
        e.record_id = record++;
        e.group = group;
        e.collective_seq_id = ++s;
        e.op_id = record;
        e.op = op;
        e.shapes = shapes;
        e.stack = stack(site);
        e.time_created_ns = 1'700'000'000'000'000'000 + record * 2'000'000;
        e.time_started_ns = e.time_created_ns + 1000;
        e.time_completed_ns = done ? e.time_started_ns + 500'000 : -1;
        e.state = done ? us::flight::EntryState::completed : us::flight::EntryState::started;
        e.retired = done;
        e.timeout_ms = 600000;
        d.entries.push_back(e);
    };
    for (int step = 0; step <= last; ++step) {
        const bool final = step == last;
        // The stopped rank never enters its step's second tp all-reduce; its tp peers wait inside it.
        for (int k = 0; k < 3; ++k) {
            if (final && rank == job.stopped && k == 1) return d;
            const bool stuck = final && stopped_tp && k == 1;
            add(tp, seq[1], all_reduce, tp_shapes, k, !stuck);
            if (stuck) return d;
        }
        add(dp, seq[2], reduce_scatter, dp_shapes, 3, !final);  // the other tp groups wait here for the stuck ones
        if (final) return d;
        add(world, seq[0], all_reduce, loss_shapes, 4, true);
    }
    return d;
}

void write_dumps(const Job& job, const std::string& dir) {
    fs::create_directories(dir);
    std::atomic<int> next{0};
    auto work = [&] {
        for (int r; (r = next.fetch_add(1)) < job.ranks;) {
            FlightDump d = make_dump(job, r);
            const size_t keep = size_t(job.entries - r % 7);  // rings wrapped at different records
            if (d.entries.size() > keep) d.entries.erase(d.entries.begin(), d.entries.end() - long(keep));
            if (!us::flight::save_flight_dump(d, dir + "/comm_lib_trace_rank_" + std::to_string(r))) std::exit(3);
        }
    };
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < std::max(1u, std::thread::hardware_concurrency()); ++t) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
}

struct Result {
    double seconds = 0, peak_rss_mib = 0;
    int culprit = -1;
    size_t culprits = 0, dumps = 0;
    char kind[32] = {}, group_desc[32] = {};
};

Result analyse_in_child(const std::string& dir) {
    int fds[2];
    if (pipe(fds) != 0) std::exit(2);
    const pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        Result r;
        const double t0 = us::bench::seconds_now();
        const us::hang::DumpSet set = us::hang::load_dumps(us::hang::find_dump_files({dir}));
        const us::hang::HangAnalysis a = us::hang::analyze_hang(set);
        r.seconds = us::bench::seconds_now() - t0;
        rusage u{};
        getrusage(RUSAGE_SELF, &u);
        r.peak_rss_mib = double(u.ru_maxrss) / 1024.0;
        r.culprits = a.culprit_ranks.size();
        r.culprit = a.culprit_ranks.empty() ? -1 : a.culprit_ranks[0];
        r.dumps = set.dumps.size();
        std::snprintf(r.kind, sizeof r.kind, "%s", us::hang::hang_kind_name(a.kind));
        if (a.group >= 0)
            std::snprintf(r.group_desc, sizeof r.group_desc, "%s", a.groups[size_t(a.group)].desc.c_str());
        if (write(fds[1], &r, sizeof r) != sizeof r) _exit(2);
        _exit(0);
    }
    close(fds[1]);
    Result r;
    const bool got = read(fds[0], &r, sizeof r) == sizeof r;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!got) std::fprintf(stderr, "bench_hang: the analysis failed (status %d)\n", status);
    return r;
}

std::string torch_python() {
    if (const char* p = std::getenv("ULTRASCOPE_TORCH_PYTHON")) return p;
    return std::system("python3 -c 'import torch.distributed' >/dev/null 2>&1") == 0 ? "python3" : "";
}

}  // namespace

int main(int argc, char** argv) {
    Job job;
    job.ranks = argc > 1 ? std::atoi(argv[1]) : 4096;
    job.entries = argc > 2 ? std::atoi(argv[2]) : 2000;
    const std::string dir = argc > 3 ? argv[3] : "/tmp/ultrascope-bench-hang";
    job.stopped = argc > 4 ? std::atoi(argv[4]) : job.ranks / 3;
    if (job.ranks < kTp || job.ranks % kTp != 0 || job.entries < 20) {
        std::fprintf(stderr, "bench_hang: RANKS must be a multiple of %d, ENTRIES at least 20\n", kTp);
        return 2;
    }
    const std::string files =
        dir + "/" + std::to_string(job.ranks) + "x" + std::to_string(job.entries) + "-" + std::to_string(job.stopped);
    if (!fs::exists(files + "/comm_lib_trace_rank_" + std::to_string(job.ranks - 1))) {
        const double t0 = us::bench::seconds_now();
        write_dumps(job, files);
        std::printf("wrote %d dumps of %d entries in %.1f s: %s\n", job.ranks, job.entries,
                    us::bench::seconds_now() - t0, files.c_str());
    }
    uint64_t bytes = 0;
    for (const auto& f : fs::directory_iterator(files)) bytes += f.file_size();
    std::printf("cores %u; %d dumps, %d entries each, %.0f MiB of pickles; stopped rank %d\n",
                std::thread::hardware_concurrency(), job.ranks, job.entries, double(bytes) / (1 << 20), job.stopped);
    analyse_in_child(files);  // warm the page cache: the figure is the analysis, not the disk
    const Result r = analyse_in_child(files);
    std::printf(
        "ultrascope: %.2f s, peak RSS %.0f MiB, %.0f MiB/s read; verdict %s in a %s group, culprit rank %d "
        "(%zu culprit%s) - %s\n",
        r.seconds, r.peak_rss_mib, double(bytes) / (1 << 20) / r.seconds, r.kind, r.group_desc, r.culprit, r.culprits,
        r.culprits == 1 ? "" : "s", r.culprit == job.stopped && r.culprits == 1 ? "right" : "WRONG");
    const std::string python = torch_python();
    if (python.empty()) {
        std::printf("torchfrtrace: not run (no python with torch: set ULTRASCOPE_TORCH_PYTHON)\n");
        return 0;
    }
    const std::string out = dir + "/torchfrtrace.txt";
    const std::string cmd = "timeout 900 " + python + " -m torch.distributed.flight_recorder.fr_trace " + files +
                            " -p comm_lib_trace_rank_ > " + out + " 2>&1";
    const double t0 = us::bench::seconds_now();
    const int rc = std::system(cmd.c_str());
    const double torch_s = us::bench::seconds_now() - t0;
    std::printf("torchfrtrace: %.2f s (exit %d; output in %s); ultrascope is %.1fx faster\n", torch_s, WEXITSTATUS(rc),
                out.c_str(), torch_s / r.seconds);
    return 0;
}
