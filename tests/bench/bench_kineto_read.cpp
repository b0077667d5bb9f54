// The Kineto reader's speed: writes a synthetic PyTorch profiler trace of about SIZE MB (default 100) with a
// realistic mix (nested CPU ops, runtime launches, kernels with long templated names on several streams, memcpy,
// NCCL collectives with record_param_comms, [memory] events, python_function frames), then reads it into a trace
// store on one core: MB of JSON per second, events per second, and the peak RSS over the JSON's size. Plain JSON
// and gzip are both timed.
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

// One training step's worth of events, appended to `out`; returns the events written.
size_t write_step(std::string& out, int step, int64_t& t, int64_t& corr) {
    char buf[1024];
    size_t n = 0;
    const int64_t step_begin = t;
    auto add = [&](int len) {
        out.append(buf, size_t(len));
        ++n;
    };
    for (int op = 0; op < 400; ++op) {
        const int64_t b = t;
        add(std::snprintf(buf, sizeof buf, R"k({"ph": "X", "cat": "python_function", "name": "torch/nn/modules/module.py(1750): _call_impl", "pid": 4037, "tid": 4037, "ts": %lld.250, "dur": 60.5, "args": {"Python parent id": %d, "Python id": %d, "Ev Idx": %d}},)k" "\n", (long long)b, op, op + 1, op));
        add(std::snprintf(buf, sizeof buf, R"k({"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 4037, "tid": 4037, "ts": %lld.500, "dur": 50.0, "args": {"External id": %lld, "Record function id": 0, "Concrete Inputs": ["", "", ""], "Input type": ["float", "float", "float"], "Input Strides": [[4096, 1], [4096, 1], [1]], "Input Dims": [[8, 4096], [4096, 4096], [4096]], "Ev Idx": %d}},)k" "\n", (long long)b, (long long)corr, op));
        add(std::snprintf(buf, sizeof buf, R"k({"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 4037, "tid": 4037, "ts": %lld.750, "dur": 40.0, "args": {"External id": %lld, "Record function id": 0, "Input type": ["float", "float", "float", "Scalar", "Scalar"], "Input Dims": [[4096], [8, 4096], [4096, 4096], [], []], "Ev Idx": %d}},)k" "\n", (long long)b + 2, (long long)corr + 1, op));
        add(std::snprintf(buf, sizeof buf, R"k({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4037, "tid": 4037, "ts": %lld, "dur": 6.0, "args": {"External id": %lld, "cbid": 211, "correlation": %lld}},)k" "\n", (long long)b + 10, (long long)corr + 1, (long long)corr));
        add(std::snprintf(buf, sizeof buf, R"k({"ph": "X", "cat": "kernel", "name": "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x5_tn_align4>(cutlass_80_tensorop_s1688gemm_128x128_16x5_tn_align4::Params)", "pid": 0, "tid": %d, "ts": %lld, "dur": 35.125, "args": {"External id": %lld, "queued": 0, "device": 0, "context": 1, "stream": %d, "correlation": %lld, "registers per thread": 230, "shared memory": 81920, "blocks per SM": 0.5, "warps per SM": 4.0, "grid": [32, 1, 1], "block": [128, 1, 1], "est. achieved occupancy %%": 6}},)k" "\n", 7 + op % 2, (long long)b + 30, (long long)corr + 1, 7 + op % 2, (long long)corr));
        if (op % 20 == 0) {
            add(std::snprintf(buf, sizeof buf, R"k({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 4037, "tid": 4037, "ts": %lld, "dur": 8, "args": {"External id": %lld, "Collective name": "allreduce", "dtype": "BFloat16", "In msg nelems": 16777216, "Out msg nelems": 16777216, "Group size": 8, "Process Group Name": "0", "Process Group Description": "default_pg", "Process Group Ranks": [0, 1, 2, 3, 4, 5, 6, 7]}},)k" "\n", (long long)b + 20, (long long)corr + 2));
            add(std::snprintf(buf, sizeof buf, R"k({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernelExC", "pid": 4037, "tid": 4037, "ts": %lld, "dur": 3, "args": {"External id": %lld, "correlation": %lld}},)k" "\n", (long long)b + 21, (long long)corr + 2, (long long)corr + 2));
            add(std::snprintf(buf, sizeof buf, R"k({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "pid": 0, "tid": 20, "ts": %lld, "dur": 400.0, "args": {"External id": %lld, "device": 0, "stream": 20, "correlation": %lld, "grid": [16, 1, 1], "block": [640, 1, 1]}},)k" "\n", (long long)b + 40, (long long)corr + 2, (long long)corr + 2));
            add(std::snprintf(buf, sizeof buf, R"k({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4037, "tid": 4037, "ts": %lld, "args": {"Total Reserved": 8589934592, "Total Allocated": %lld, "Bytes": 1048576, "Addr": 140000000, "Device Type": 1, "Device Id": 0}},)k" "\n", (long long)b + 22, (long long)(4000000000LL + op * 1048576LL)));
            add(std::snprintf(buf, sizeof buf, R"k({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7, "ts": %lld, "dur": 12.0, "args": {"External id": %lld, "device": 0, "stream": 7, "correlation": %lld, "bytes": 1048576, "memory bandwidth (GB/s)": 87.4}},)k" "\n", (long long)b + 45, (long long)corr + 3, (long long)corr + 3));
        }
        corr += 4;
        t += 60;
    }
    add(std::snprintf(buf, sizeof buf, R"k({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "pid": 4037, "tid": 4037, "ts": %lld, "dur": %lld, "args": {"External id": %lld}},)k" "\n", step, (long long)step_begin, (long long)(t - step_begin), (long long)corr));
    return n;
}

}  // namespace

int main(int argc, char** argv) {
    const double target_mb = argc > 1 ? std::atof(argv[1]) : 100;
    const std::string dir = argc > 2 ? argv[2] : std::filesystem::temp_directory_path().string();
    const std::string plain = dir + "/bench_kineto_rank0.json", gz = plain + ".gz";
    size_t events = 0;
    {  // written in pieces: the writer holds one step at a time
        std::ofstream out(plain, std::ios::binary);
        gzFile g = gzopen(gz.c_str(), "wb1");
        std::string head = R"k({"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8}, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}], "traceEvents": [)k" "\n";
        size_t written = 0;
        int64_t t = 1682725898000000, corr = 1000;
        for (int step = 0; written < size_t(target_mb * 1e6); ++step) {
            events += write_step(head, step, t, corr);
            out << head;
            gzwrite(g, head.data(), unsigned(head.size()));
            written += head.size();
            head.clear();
        }
        head = R"k({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 1682725898000000, "dur": 1}]})k" "\n";
        out << head;
        gzwrite(g, head.data(), unsigned(head.size()));
        gzclose(g);
    }
    const double json_mb = double(std::filesystem::file_size(plain)) / 1e6;
    const double gz_mb = double(std::filesystem::file_size(gz)) / 1e6;
    std::printf("synthetic Kineto trace: %.1f MB of JSON (%.1f MB gzip), %zu events\n", json_mb, gz_mb, events);
    const double rss_before = status_mib("VmRSS:");
    for (const std::string& path : {plain, gz}) {
        size_t spans = 0;
        double parse_s = 0, ingest_s = 0, cpu_s = 1e30;
        const double total = us::bench::best_seconds(2, [&] {
            us::prof::TraceStore store;
            const double c0 = cpu_seconds();
            const double t0 = us::bench::seconds_now();
            const us::prof::KinetoFile file = us::prof::parse_kineto_file(path);
            const double t1 = us::bench::seconds_now();
            us::prof::ingest_kineto(file, 0, "distributedInfo", store);
            store.finalize();
            parse_s = t1 - t0, ingest_s = us::bench::seconds_now() - t1;
            spans = store.span_count();
            cpu_s = std::min(cpu_s, cpu_seconds() - c0);
        });
        std::printf("%-5s read+ingest %.2f s wall (parse %.2f s, map+store %.2f s), %.2f s CPU: %.0f MB of JSON per "
                    "CPU second (%.0f per wall second), %.2f M events per CPU second; %zu spans kept\n",
                    path == gz ? "gzip" : "plain", total, parse_s, ingest_s, cpu_s, json_mb / cpu_s, json_mb / total,
                    double(events) / cpu_s / 1e6, spans);
    }
    const double peak = status_mib("VmHWM:");
    std::printf("peak RSS %.0f MiB (%.0f MiB before reading) = %.2f x the uncompressed JSON (%.0f MiB)\n", peak,
                rss_before, peak / (json_mb * 1e6 / 1048576.0), json_mb * 1e6 / 1048576.0);
    std::filesystem::remove(plain);
    std::filesystem::remove(gz);
    return 0;
}
