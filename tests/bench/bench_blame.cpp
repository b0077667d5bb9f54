// Blame at scale (docs/blame.md): writes RANKS synthetic Kineto rank files of SIZE MB of JSON each (gzip; the
// generator of bench_kineto_read), one rank's compute FACTOR times as long as the others' (each rank's compute also
// jitters by +-2% between collectives, so that noise is there to be told from the culprit), then reports the run from
// its digests as `ultrascope report DIR` does beyond 64 ranks: the first time from the traces (one worker per core),
// the second from the digests kept beside them. Prints the time, the JSON read per second per core, the peak RSS of
// each report (measured in a child process), the digests' size against the JSON's, and whether the slowed rank is
// named first.
//   bench_blame [RANKS=1024] [SIZE_MB=2] [DIR=/tmp/ultrascope-bench-blame] [SLOW_RANK=RANKS/3] [FACTOR=1.05]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "kineto_synth.h"
#include "profiler/runs/digest_report.h"

namespace {

namespace fs = std::filesystem;

// A deterministic value in [-1, 1] for (rank, step, k): the jitter every run of the bench writes alike.
double jitter(int rank, int step, int k) {
    uint64_t x = uint64_t(rank) * 0x9E3779B97F4A7C15ull ^ uint64_t(step) * 0xC2B2AE3D27D4EB4Full ^ uint64_t(k + 1);
    x ^= x >> 31, x *= 0xBF58476D1CE4E5B9ull, x ^= x >> 27, x *= 0x94D049BB133111EBull, x ^= x >> 31;
    return double(x >> 11) / double(1ull << 52) - 1.0;
}

struct Synthetic {
    int ranks = 0, slow_rank = 0;
    double factor = 1.0;
    std::vector<double> max_scale;  // by step * 20 + k: the slowest rank's interval scale (the last to arrive)

    double scale(int rank, int step, int k) const {
        return (rank == slow_rank ? factor : 1.0) * (1.0 + 0.02 * jitter(rank, step, k));
    }
};

struct Result {
    double seconds = 0, peak_rss_mib = 0;
    int top_rank = -1;   // the rank most to blame
    bool named = false;  // and it stands out
    double share = 0;
    size_t from_cache = 0, made = 0, errors = 0;
    uint64_t trace_bytes = 0, digest_bytes = 0;
    char verdict[256] = {};
};

// One report of the run from its digests, in a child process: its peak RSS is the report's alone.
Result report_in_child(const std::string& dir) {
    int fds[2];
    if (pipe(fds) != 0) std::exit(2);
    const pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        Result r;
        const auto t0 = std::chrono::steady_clock::now();
        us::prof::DigestOptions options;
        const us::prof::DigestReport rep = us::prof::digest_report(us::prof::digest_run({dir}, options));
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (!rep.cross.blame.stragglers.empty())
            r.top_rank = rep.cross.blame.stragglers[0].rank, r.named = rep.cross.blame.stragglers[0].stands_out,
            r.share = rep.cross.blame.stragglers[0].share;
        r.from_cache = rep.run.from_cache, r.made = rep.run.made, r.errors = rep.run.errors.size();
        r.trace_bytes = rep.run.trace_bytes, r.digest_bytes = rep.run.digest_bytes;
        std::snprintf(r.verdict, sizeof r.verdict, "%s", rep.cross.blame.verdict.c_str());
        if (write(fds[1], &r, sizeof r) != ssize_t(sizeof r)) _exit(2);
        _exit(0);
    }
    close(fds[1]);
    Result r;
    const bool got = read(fds[0], &r, sizeof r) == ssize_t(sizeof r);
    close(fds[0]);
    int status = 0;
    rusage usage{};
    wait4(pid, &status, 0, &usage);
    if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "bench_blame: the report's process failed\n");
        std::exit(1);
    }
    r.peak_rss_mib = double(usage.ru_maxrss) / 1024.0;
    return r;
}

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    return "unknown";
}

}  // namespace

int main(int argc, char** argv) {
    const int ranks = argc > 1 ? std::atoi(argv[1]) : 1024;
    const double mb = argc > 2 ? std::atof(argv[2]) : 2.0;  // 4 steps: the first warms up
    const std::string dir = argc > 3 ? argv[3] : "/tmp/ultrascope-bench-blame";
    Synthetic synth;
    synth.ranks = ranks;
    synth.slow_rank = argc > 4 ? std::atoi(argv[4]) : ranks / 3;
    synth.factor = argc > 5 ? std::atof(argv[5]) : 1.05;
    if (ranks < 2 || mb <= 0 || synth.slow_rank < 0 || synth.slow_rank >= ranks || synth.factor < 1) {
        std::fprintf(stderr, "usage: bench_blame [RANKS>=2] [SIZE_MB>0] [DIR] [SLOW_RANK<RANKS] [FACTOR>=1]\n");
        return 2;
    }
    std::printf("CPU: %s, %u cores\n", cpu_model().c_str(), std::thread::hardware_concurrency());

    // The run, written afresh (its digests too): a step is about 0.5 MB of JSON.
    fs::remove_all(dir);
    fs::create_directories(dir);
    const int steps = int(mb * 1e6 / 480e3) + 2;
    synth.max_scale.assign(size_t(steps) * 20, 0.0);
    for (int r = 0; r < ranks; ++r)
        for (int s = 0; s < steps; ++s)
            for (int k = 0; k < 20; ++k)
                synth.max_scale[size_t(s) * 20 + k] =
                    std::max(synth.max_scale[size_t(s) * 20 + k], synth.scale(r, s, k));
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> writers;
    const int threads = int(std::max(1u, std::thread::hardware_concurrency()));
    for (int w = 0; w < threads; ++w)
        writers.emplace_back([&, w] {
            for (int r = w; r < ranks; r += threads) {
                us::bench::RankSkew skew;
                skew.interval_scale = [&, r](int s, int k) { return synth.scale(r, s, k); };
                // Collective k ends the interval k's compute began: the others wait there for the slowest.
                skew.wait_us = [&, r](int s, int k) {
                    if (s >= steps) return 0.0;
                    return 20 * 60 * (synth.max_scale[size_t(s) * 20 + k] - synth.scale(r, s, k));
                };
                char name[64];
                std::snprintf(name, sizeof name, "/rank%05d.pt.trace.json.gz", r);
                us::bench::write_kineto_rank("", dir + name, mb, r, ranks, 1, &skew);
            }
        });
    for (auto& t : writers) t.join();
    const double write_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf(
        "%d synthetic rank files of %.1f MB of JSON in %s (rank %d computes %.2fx, +-2%% jitter), written in "
        "%.1f s\n",
        ranks, mb, dir.c_str(), synth.slow_rank, synth.factor, write_s);

    const Result cold = report_in_child(dir);
    const Result warm = report_in_child(dir);
    const double json_mb = double(ranks) * mb;
    std::printf(
        "report from the traces : %7.2f s  %6.1f MB/s of JSON per core (%d cores), peak RSS %6.1f MiB, "
        "%zu digests made, %zu errors\n",
        cold.seconds, json_mb / cold.seconds / threads, threads, cold.peak_rss_mib, cold.made, cold.errors);
    std::printf("report from the digests: %7.2f s  (%.1fx faster), peak RSS %6.1f MiB, %zu digests read\n",
                warm.seconds, cold.seconds / warm.seconds, warm.peak_rss_mib, warm.from_cache);
    std::printf("digests: %.2f MB against %.0f MB of JSON (1/%.0f; %.1f MB of gzip on disk)\n",
                double(cold.digest_bytes) / 1e6, json_mb,
                json_mb * 1e6 / double(std::max<uint64_t>(cold.digest_bytes, 1)), double(cold.trace_bytes) / 1e6);
    std::printf("verdict: %s\n", cold.verdict);
    const bool named = cold.named && warm.named && cold.top_rank == synth.slow_rank && warm.top_rank == synth.slow_rank;
    std::printf("slowed rank %d named first: %s (most to blame: rank %d, %.0f%% of the waiting)\n", synth.slow_rank,
                named ? "yes" : "NO", cold.top_rank, 100 * cold.share);
    std::printf(
        "targets (issue 43, 1024 ranks x 10 MB, 2 cores): report <= 20 s, peak RSS <= 512 MiB, second "
        "report >= 5x faster, slowed rank named first\n");
    return named ? 0 : 1;
}
