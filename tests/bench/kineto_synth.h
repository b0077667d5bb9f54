// The synthetic PyTorch profiler (Kineto) trace the Kineto benchmarks write: a realistic mix per training step
// (nested CPU ops, runtime launches, kernels with long templated names on several streams, memcpy, NCCL collectives
// with record_param_comms, [memory] events, python_function frames), about 250 bytes of JSON per event.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>

namespace us::bench {

// How one rank's steps differ from the others' (bench_blame): its compute between collectives `k` and `k + 1` of
// step `step` lasts interval_scale(step, k) times the plain 60 us an op, and its part of collective k lasts 400 us
// plus wait_us(step, k), the time it waited there for the last rank to arrive.
struct RankSkew {
    std::function<double(int step, int k)> interval_scale;
    std::function<double(int step, int k)> wait_us;
};

// One training step's worth of events, appended to `out`; returns the events written.
inline size_t write_step(std::string& out, int step, int64_t& t, int64_t& corr, int world = 8,
                         const RankSkew* skew = nullptr) {
    char buf[1024];
    size_t n = 0;
    const int64_t step_begin = t;
    auto add = [&](int len) {
        out.append(buf, size_t(len));
        ++n;
    };
    // The group's ranks, as PyTorch writes them for a small group (a large one's list is left out here).
    std::string group_ranks;
    for (int r = 0; r < world && world <= 64; ++r) group_ranks += (r ? ", " : "") + std::to_string(r);
    double scale = skew ? skew->interval_scale(step, 0) : 1.0;
    for (int op = 0; op < 400; ++op) {
        const int64_t b = t;
        if (skew && op % 20 == 0) scale = skew->interval_scale(step, op / 20);
        add(std::snprintf(
            buf, sizeof buf,
            R"k({"ph": "X", "cat": "python_function", "name": "torch/nn/modules/module.py(1750): _call_impl", "pid": 4037, "tid": 4037, "ts": %lld.250, "dur": 60.5, "args": {"Python parent id": %d, "Python id": %d, "Ev Idx": %d}},)k"
            "\n",
            (long long)b, op, op + 1, op));
        add(std::snprintf(
            buf, sizeof buf,
            R"k({"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 4037, "tid": 4037, "ts": %lld.500, "dur": 50.0, "args": {"External id": %lld, "Record function id": 0, "Concrete Inputs": ["", "", ""], "Input type": ["float", "float", "float"], "Input Strides": [[4096, 1], [4096, 1], [1]], "Input Dims": [[8, 4096], [4096, 4096], [4096]], "Ev Idx": %d}},)k"
            "\n",
            (long long)b, (long long)corr, op));
        add(std::snprintf(
            buf, sizeof buf,
            R"k({"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 4037, "tid": 4037, "ts": %lld.750, "dur": 40.0, "args": {"External id": %lld, "Record function id": 0, "Input type": ["float", "float", "float", "Scalar", "Scalar"], "Input Dims": [[4096], [8, 4096], [4096, 4096], [], []], "Ev Idx": %d}},)k"
            "\n",
            (long long)b + 2, (long long)corr + 1, op));
        add(std::snprintf(
            buf, sizeof buf,
            R"k({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4037, "tid": 4037, "ts": %lld, "dur": 6.0, "args": {"External id": %lld, "cbid": 211, "correlation": %lld}},)k"
            "\n",
            (long long)b + 10, (long long)corr + 1, (long long)corr));
        add(std::snprintf(
            buf, sizeof buf,
            R"k({"ph": "X", "cat": "kernel", "name": "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x5_tn_align4>(cutlass_80_tensorop_s1688gemm_128x128_16x5_tn_align4::Params)", "pid": 0, "tid": %d, "ts": %lld, "dur": %.3f, "args": {"External id": %lld, "queued": 0, "device": 0, "context": 1, "stream": %d, "correlation": %lld, "registers per thread": 230, "shared memory": 81920, "blocks per SM": 0.5, "warps per SM": 4.0, "grid": [32, 1, 1], "block": [128, 1, 1], "est. achieved occupancy %%": 6}},)k"
            "\n",
            7 + op % 2, (long long)b + 30, 35.125 * scale, (long long)corr + 1, 7 + op % 2, (long long)corr));
        if (op % 20 == 0) {
            add(std::snprintf(
                buf, sizeof buf,
                R"k({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 4037, "tid": 4037, "ts": %lld, "dur": 8, "args": {"External id": %lld, "Collective name": "allreduce", "dtype": "BFloat16", "In msg nelems": 16777216, "Out msg nelems": 16777216, "Group size": %d, "Process Group Name": "0", "Process Group Description": "default_pg"%s%s%s}},)k"
                "\n",
                (long long)b + 20, (long long)corr + 2, world,
                group_ranks.empty() ? "" : ", \"Process Group Ranks\": [", group_ranks.c_str(),
                group_ranks.empty() ? "" : "]"));
            add(std::snprintf(
                buf, sizeof buf,
                R"k({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernelExC", "pid": 4037, "tid": 4037, "ts": %lld, "dur": 3, "args": {"External id": %lld, "correlation": %lld}},)k"
                "\n",
                (long long)b + 21, (long long)corr + 2, (long long)corr + 2));
            add(std::snprintf(
                buf, sizeof buf,
                R"k({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "pid": 0, "tid": 20, "ts": %lld, "dur": %.3f, "args": {"External id": %lld, "device": 0, "stream": 20, "correlation": %lld, "grid": [16, 1, 1], "block": [640, 1, 1]}},)k"
                "\n",
                (long long)b + 40, 400.0 + (skew ? skew->wait_us(step, op / 20) : 0.0), (long long)corr + 2,
                (long long)corr + 2));
            add(std::snprintf(
                buf, sizeof buf,
                R"k({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4037, "tid": 4037, "ts": %lld, "args": {"Total Reserved": 8589934592, "Total Allocated": %lld, "Bytes": 1048576, "Addr": 140000000, "Device Type": 1, "Device Id": 0}},)k"
                "\n",
                (long long)b + 22, (long long)(4000000000LL + op * 1048576LL)));
            // A copy launched by cudaMemcpyAsync (its correlation), on stream 7 after that stream's kernel ends: a
            // CUDA stream runs one thing at a time.
            add(std::snprintf(
                buf, sizeof buf,
                R"k({"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 4037, "tid": 4037, "ts": %lld, "dur": 3, "args": {"External id": %lld, "cbid": 41, "correlation": %lld}},)k"
                "\n",
                (long long)b + 30, (long long)corr + 3, (long long)corr + 3));
            add(std::snprintf(
                buf, sizeof buf,
                R"k({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7, "ts": %lld, "dur": 12.0, "args": {"External id": %lld, "device": 0, "stream": 7, "correlation": %lld, "bytes": 1048576, "memory bandwidth (GB/s)": 87.4}},)k"
                "\n",
                (long long)b + 70, (long long)corr + 3, (long long)corr + 3));
        }
        corr += 4;
        t += skew ? int64_t(60 * scale + 0.5) : 60;
    }
    add(std::snprintf(
        buf, sizeof buf,
        R"k({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "pid": 4037, "tid": 4037, "ts": %lld, "dur": %lld, "args": {"External id": %lld}},)k"
        "\n",
        step, (long long)step_begin, (long long)(t - step_begin), (long long)corr));
    return n;
}

// Writes rank `rank` of a `world`-rank run, about `mb` MB of JSON, to `path` (plain) and/or `gz_path` (gzip at
// `gz_level`); either may be empty. Returns the events written.
inline size_t write_kineto_rank(const std::string& path, const std::string& gz_path, double mb, int rank = 0,
                                int world = 8, int gz_level = 1, const RankSkew* skew = nullptr) {
    size_t events = 0;
    std::ofstream out;
    if (!path.empty()) out.open(path, std::ios::binary);
    gzFile g = gz_path.empty() ? nullptr : gzopen(gz_path.c_str(), ("wb" + std::to_string(gz_level)).c_str());
    auto put = [&](const std::string& s) {
        if (out.is_open()) out << s;
        if (g) gzwrite(g, s.data(), unsigned(s.size()));
    };
    std::string head = R"k({"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": )k" +
                       std::to_string(rank) + R"k(, "world_size": )k" + std::to_string(world) +
                       R"k(}, "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}], "traceEvents": [)k"
                       "\n";
    size_t written = 0;
    int64_t t = 1682725898000000 + rank * 37, corr = 1000;
    for (int step = 0; written < size_t(mb * 1e6); ++step) {  // written in pieces: one step held at a time
        events += write_step(head, step, t, corr, world, skew);
        put(head);
        written += head.size();
        head.clear();
    }
    put(R"k({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 1682725898000000, "dur": 1}]})k"
        "\n");
    if (g) gzclose(g);
    return events;
}

}  // namespace us::bench
