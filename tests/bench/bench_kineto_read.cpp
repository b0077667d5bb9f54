// The Kineto reader's speed: writes a synthetic PyTorch profiler trace of about SIZE MB (default 100) with a
// realistic mix (nested CPU ops, runtime launches, kernels with long templated names on several streams, memcpy,
// NCCL collectives with record_param_comms, [memory] events, python_function frames), then reads it into a trace
// store on one core: MB of JSON per second, events per second, and the peak RSS over the JSON's size. Plain JSON
// and gzip are both timed, each read whole (simdjson, libdeflate) and in pieces (the reader for larger traces).
// `--trace FILE` times a real trace instead (gzip or plain JSON; the other form is written beside it in DIR).
//   bench_kineto_read [SIZE_MB] [DIR]
//   bench_kineto_read --trace FILE [DIR]
#include <sys/resource.h>
#include <zlib.h>

#include <iterator>

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

// A real trace in both forms, plain JSON and gzip, in `dir`: copies of `trace` (inflated or deflated as needed).
bool copy_real_trace(const std::string& trace, const std::string& plain, const std::string& gz) {
    const bool is_gz = trace.size() > 3 && trace.compare(trace.size() - 3, 3, ".gz") == 0;
    std::string json;
    if (is_gz) {
        gzFile in = gzopen(trace.c_str(), "rb");
        if (!in) return false;
        char buffer[1 << 16];
        for (int n; (n = gzread(in, buffer, sizeof buffer)) > 0;) json.append(buffer, size_t(n));
        gzclose(in);
    } else {
        std::ifstream in(trace, std::ios::binary);
        json.assign(std::istreambuf_iterator<char>(in), {});
    }
    if (json.empty()) return false;
    std::ofstream(plain, std::ios::binary).write(json.data(), std::streamsize(json.size()));
    gzFile out = gzopen(gz.c_str(), "wb6");
    if (!out) return false;
    gzwrite(out, json.data(), unsigned(json.size()));
    return gzclose(out) == Z_OK;
}

}  // namespace

int main(int argc, char** argv) {
    const bool real = argc > 2 && std::string(argv[1]) == "--trace";
    const double target_mb = argc > 1 && !real ? std::atof(argv[1]) : 100;
    const int dir_arg = real ? 3 : 2;
    const std::string dir = argc > dir_arg ? argv[dir_arg] : std::filesystem::temp_directory_path().string();
    const std::string plain = dir + "/bench_kineto_rank0.json", gz = plain + ".gz";
    size_t events = 0;
    if (real && !copy_real_trace(argv[2], plain, gz)) {
        std::fprintf(stderr, "bench_kineto_read: cannot read the trace '%s' (give a Kineto JSON or .json.gz file)\n",
                     argv[2]);
        return 2;
    }
    if (!real) events = us::bench::write_kineto_rank(plain, gz, target_mb);
    const double json_mb = double(std::filesystem::file_size(plain)) / 1e6;
    const double gz_mb = double(std::filesystem::file_size(gz)) / 1e6;
    if (real) {
        us::prof::ByteSource source(plain);
        events = us::prof::parse_kineto(source).events;
        std::printf("real Kineto trace %s: %.1f MB of JSON (%.1f MB gzip, level 6), %zu events\n", argv[2], json_mb,
                    gz_mb, events);
    } else {
        std::printf("synthetic Kineto trace: %.1f MB of JSON (%.1f MB gzip), %zu events\n", json_mb, gz_mb, events);
    }
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
        double parse_s = 1e30, ingest_s = 1e30, cpu_s = 1e30;  // each the best of the runs
        const double total = us::bench::best_seconds(real ? 5 : 2, [&] {
            us::prof::TraceStore store;
            const double c0 = cpu_seconds();
            const double t0 = us::bench::seconds_now();
            us::prof::ByteSource source(path);
            const us::prof::KinetoFile file = us::prof::parse_kineto(source, c.walk);
            const double t1 = us::bench::seconds_now();
            us::prof::ingest_kineto(file, 0, "distributedInfo", store);
            store.finalize();
            parse_s = std::min(parse_s, t1 - t0), ingest_s = std::min(ingest_s, us::bench::seconds_now() - t1);
            spans = store.span_count();
            cpu_s = std::min(cpu_s, cpu_seconds() - c0);
        });
        std::printf(
            "%s read+ingest %.3f s wall (parse %.3f s: %.0f MB/s; map+store %.3f s), %.3f s CPU: %.0f MB of JSON "
            "per CPU second (%.0f per wall second), %.2f M events per CPU second; %zu spans kept\n",
            c.label, total, parse_s, json_mb / parse_s, ingest_s, cpu_s, json_mb / cpu_s, json_mb / total,
            double(events) / cpu_s / 1e6, spans);
    }
    const double peak = status_mib("VmHWM:");
    std::printf("peak RSS %.0f MiB (%.0f MiB before reading) = %.2f x the uncompressed JSON (%.0f MiB)\n", peak,
                rss_before, peak / (json_mb * 1e6 / 1048576.0), json_mb * 1e6 / 1048576.0);
    std::filesystem::remove(plain);
    std::filesystem::remove(gz);
    return 0;
}
