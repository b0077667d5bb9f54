// A plain-JSON PyTorch profiler (Kineto) trace of any size for the tests that need a large file (the progressive
// load's unit tests, the GUI closed mid-load): steps of CPU ops, each launching a kernel on one stream.
#pragma once

#include <cstdio>
#include <fstream>
#include <string>

namespace us::test {

// A plain-JSON Kineto trace of rank `rank` of about `mb` MB: steps of CPU ops, each launching a kernel.
inline void write_synthetic_kineto(const std::string& path, int rank, double mb) {
    std::ofstream out(path, std::ios::binary);
    out << R"({"distributedInfo": {"backend": "nccl", "rank": )" << rank << R"(, "world_size": 16}, "traceEvents": [)";
    long long t = 1000000, corr = 1;
    size_t written = 0;
    char buf[512];
    for (int step = 0; written < size_t(mb * 1e6); ++step) {
        const long long step_begin = t;
        for (int op = 0; op < 200; ++op, t += 20, ++corr) {
            const int n = std::snprintf(
                buf, sizeof buf,
                R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": %lld, "dur": 15, "args": {"External id": %lld}},)"
                "\n"
                R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": %lld, "dur": 4, "args": {"correlation": %lld}},)"
                "\n"
                R"({"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": %lld, "dur": 12, "args": {"stream": 7, "correlation": %lld}},)"
                "\n",
                t, corr, t + 2, corr, t + 5, corr);
            out.write(buf, n);
            written += size_t(n);
        }
        out << R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#)" << step
            << R"(", "pid": 1, "tid": 1, "ts": )" << step_begin << R"(, "dur": )" << (t - step_begin) << "},\n";
    }
    out << R"({"ph": "X", "cat": "Trace", "name": "end", "pid": 1, "tid": 1, "ts": 1000000, "dur": 1}]})";
}

}  // namespace us::test
