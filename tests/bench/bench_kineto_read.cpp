// The Kineto reader's speed: writes a synthetic PyTorch profiler trace of about SIZE MB (default 100) with a
// realistic mix (nested CPU ops, runtime launches, kernels with long templated names on several streams, memcpy,
// NCCL collectives with record_param_comms, [memory] events, python_function frames), then reads it into a trace
// store on one core: MB of JSON per second, events per second, and the peak RSS over the JSON's size. Plain JSON
// and gzip are both timed, each read whole (simdjson, libdeflate) and in pieces (the reader for larger traces).
//   bench_kineto_read [SIZE_MB] [DIR]
#include <sys/resource.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>

#include "bench_timing.h"
#include "kineto_synth.h"
#include "profiler/import/kineto_parse.h"
#include "profiler/import/kineto_reader.h"

namespace {

double cpu_seconds() {  // this thread's CPU time: the figure per core, whatever else the machine runs
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// Current and peak resident memory, from /proc/self/status (MiB).
double status_mib(const char* key) {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(key, 0) == 0) return std::atof(line.c_str() + std::strlen(key)) / 1024.0;
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const double target_mb = argc > 1 ? std::atof(argv[1]) : 100;
    const std::string dir = argc > 2 ? argv[2] : std::filesystem::temp_directory_path().string();
    const std::string plain = dir + "/bench_kineto_rank0.json", gz = plain + ".gz";
    const size_t events = us::bench::write_kineto_rank(plain, gz, target_mb);
    const double json_mb = double(std::filesystem::file_size(plain)) / 1e6;
    const double gz_mb = double(std::filesystem::file_size(gz)) / 1e6;
    std::printf("synthetic Kineto trace: %.1f MB of JSON (%.1f MB gzip), %zu events\n", json_mb, gz_mb, events);
    const double rss_before = status_mib("VmRSS:");
    // Each file both ways: whole with simdjson (what the reader does up to 256 MiB of JSON) and in pieces (larger).
    struct Case {
        const std::string* path;
        us::prof::KinetoWalk walk;
        const char* label;
    };
    const Case cases[] = {{&plain, us::prof::KinetoWalk::whole_when_it_fits, "plain whole "},
                          {&plain, us::prof::KinetoWalk::in_pieces, "plain pieces"},
                          {&gz, us::prof::KinetoWalk::whole_when_it_fits, "gzip  whole "},
                          {&gz, us::prof::KinetoWalk::in_pieces, "gzip  pieces"}};
    for (const Case& c : cases) {
        const std::string& path = *c.path;
        size_t spans = 0;
        double parse_s = 0, ingest_s = 0, cpu_s = 1e30;
        const double total = us::bench::best_seconds(2, [&] {
            us::prof::TraceStore store;
            const double c0 = cpu_seconds();
            const double t0 = us::bench::seconds_now();
            us::prof::ByteSource source(path);
            const us::prof::KinetoFile file = us::prof::parse_kineto(source, c.walk);
            const double t1 = us::bench::seconds_now();
            us::prof::ingest_kineto(file, 0, "distributedInfo", store);
            store.finalize();
            parse_s = t1 - t0, ingest_s = us::bench::seconds_now() - t1;
            spans = store.span_count();
            cpu_s = std::min(cpu_s, cpu_seconds() - c0);
        });
        std::printf(
            "%s read+ingest %.2f s wall (parse %.2f s, map+store %.2f s), %.2f s CPU: %.0f MB of JSON per "
            "CPU second (%.0f per wall second), %.2f M events per CPU second; %zu spans kept\n",
            c.label, total, parse_s, ingest_s, cpu_s, json_mb / cpu_s, json_mb / total, double(events) / cpu_s / 1e6,
            spans);
    }
    const double peak = status_mib("VmHWM:");
    std::printf("peak RSS %.0f MiB (%.0f MiB before reading) = %.2f x the uncompressed JSON (%.0f MiB)\n", peak,
                rss_before, peak / (json_mb * 1e6 / 1048576.0), json_mb * 1e6 / 1048576.0);
    std::filesystem::remove(plain);
    std::filesystem::remove(gz);
    return 0;
}
