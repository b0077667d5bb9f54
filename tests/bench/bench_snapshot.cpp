// Opening a large PyTorch memory snapshot: writes a pickle (protocol 4, as _dump_snapshot does) of N trace entries
// shaped like training steps (parameters, then per step forward activations freed in reverse, each with a stack
// of 12-20 frames drawn from torch's and a user's files, frame dicts shared through the memo as torch's are), then
// reads and analyses it in a fresh process and prints the seconds and that process's peak RSS.
//   bench_snapshot [--entries N] [--keep FILE]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "profiler/plain/pickle_writer.h"
#include "profiler/snapshot/snapshot_analysis.h"
#include "profiler/snapshot/snapshot_series.h"

using namespace us::snap;
using namespace us::plain;

namespace {

struct Frame {
    std::string file, name;
    int line;
};

std::string generate(size_t entries) {
    // 40 distinct stacks over a pool of frames: torch internals, then the user's model and training loop.
    const char* torch_files[] = {"/usr/lib/python3/site-packages/torch/nn/modules/linear.py",
                                 "/usr/lib/python3/site-packages/torch/nn/functional.py",
                                 "/usr/lib/python3/site-packages/torch/nn/modules/module.py",
                                 "/usr/lib/python3/site-packages/torch/autograd/graph.py",
                                 "/usr/lib/python3/site-packages/torch/_tensor.py"};
    std::vector<std::vector<Frame>> stacks(40);
    for (size_t s = 0; s < stacks.size(); ++s) {
        const size_t depth = 12 + s % 9;
        for (size_t f = 0; f < depth; ++f) {
            if (f < depth / 2)
                stacks[s].push_back({torch_files[(s + f) % 5], f % 2 ? "_call_impl" : "linear", int(100 + f)});
            else
                stacks[s].push_back(
                    {"model/transformer_block_" + std::to_string(f) + ".py", "forward", int(10 * s + f)});
        }
    }
    PickleWriter w;
    std::vector<std::vector<uint32_t>> frame_keys(stacks.size());  // memo keys of each stack's frame dicts
    const auto write_frames = [&](size_t s) {
        w.string("frames");
        w.begin_list();
        if (frame_keys[s].empty()) {
            for (const Frame& f : stacks[s]) {
                w.begin_dict();
                w.string("filename"), w.string(f.file), w.string("line"), w.integer(f.line), w.string("name"),
                    w.string(f.name);
                w.end_dict();
                frame_keys[s].push_back(w.memoize());
            }
        } else {
            for (const uint32_t k : frame_keys[s]) w.get(k);
        }
        w.end_list();
    };
    const auto entry = [&](const char* action, uint64_t addr, int64_t size, size_t stack, int64_t t) {
        w.begin_dict();
        w.string("action"), w.string(action), w.string("addr"), w.integer(int64_t(addr)), w.string("size"),
            w.integer(size);
        w.string("stream"), w.integer(0), w.string("time_us"), w.integer(t);
        write_frames(stack);
        w.end_dict();
    };
    const uint64_t base = 0x7f0000000000;
    const int64_t segment = int64_t(1) << 30, param = 4 << 20;
    const size_t params = 200, acts = 400;
    w.begin_dict();
    w.string("device_traces");
    w.begin_list();
    w.begin_list();
    size_t n = 0;
    int64_t t = 0;
    entry("segment_alloc", base, segment, 0, t++), ++n;
    entry("segment_alloc", base + uint64_t(segment), segment, 0, t++), ++n;
    for (size_t p = 0; p < params; ++p) entry("alloc", base + p * param, param, p % 5, t++), ++n;
    // Steps: activations allocated in forward, freed in reverse (free_requested + free_completed) in backward.
    while (n < entries) {
        uint64_t cursor = base + uint64_t(segment);
        std::vector<std::pair<uint64_t, int64_t>> live;
        for (size_t a = 0; a < acts && n < entries; ++a) {
            const int64_t size = int64_t(512) << (a % 12);
            entry("alloc", cursor, size, 5 + a % 35, t++), ++n;
            live.emplace_back(cursor, size);
            cursor += uint64_t(size);
        }
        for (size_t a = live.size(); a-- > 0 && n < entries;) {
            entry("free_requested", live[a].first, live[a].second, 5 + a % 35, t++), ++n;
            if (n < entries) entry("free_completed", live[a].first, live[a].second, 5 + a % 35, t++), ++n;
        }
    }
    w.end_list();
    w.end_list();
    w.string("segments");
    w.begin_list();  // the dump-time segments: the parameters, and an empty second segment (approximate: a step may
    for (int s = 0; s < 2; ++s) {  // be cut short by N; the analysis then notes the difference)
        w.begin_dict();
        w.string("device"), w.integer(0), w.string("address"),
            w.integer(int64_t(base + uint64_t(s) * uint64_t(segment)));
        w.string("total_size"), w.integer(segment), w.string("stream"), w.integer(0), w.string("segment_type"),
            w.string("large");
        w.string("blocks");
        w.begin_list();
        const size_t blocks = s == 0 ? params : 0;
        for (size_t p = 0; p < blocks; ++p) {
            w.begin_dict();
            w.string("address"), w.integer(int64_t(base + p * param)), w.string("size"), w.integer(param);
            w.string("requested_size"), w.integer(param), w.string("state"), w.string("active_allocated");
            write_frames(p % 5);
            w.end_dict();
        }
        w.end_list();
        w.end_dict();
    }
    w.end_list();
    w.end_dict();
    return w.finish();
}

long peak_rss_kib() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

int read_and_analyse(const std::string& path) {
    const auto t0 = std::chrono::steady_clock::now();
    const MemorySnapshot snap = load_memory_snapshot(path);
    const auto t1 = std::chrono::steady_clock::now();
    const SnapshotAnalysis a = analyze_snapshot(snap);
    const auto t2 = std::chrono::steady_clock::now();
    const double read_s = std::chrono::duration<double>(t1 - t0).count();
    const double analyse_s = std::chrono::duration<double>(t2 - t1).count();
    // What the GUI adds: the running totals by category (once, on load), and re-sampling a window for the plot
    // (each time the window changes): all of the trace, and a zoom on its middle 1%.
    std::vector<SnapshotSeries> series;
    for (const auto& d : a.devices) series.push_back(build_series(snap, d));
    const auto t3 = std::chrono::steady_clock::now();
    size_t sampled = 0;
    const size_t n = series.empty() ? 0 : series[0].size();
    for (int rep = 0; rep < 10; ++rep) sampled += n ? sample_window(series[0], 0, n, 1280).size() : 0;
    const auto t4 = std::chrono::steady_clock::now();
    for (int rep = 0; rep < 10; ++rep) sampled += n ? sample_window(series[0], n / 2, n / 2 + n / 100, 1280).size() : 0;
    const auto t5 = std::chrono::steady_clock::now();
    std::printf(
        "bench_snapshot: categories over time: build %.3f s; re-sample 1280 columns: all %.2f ms, the middle 1%% "
        "%.2f ms (%zu samples)\n",
        std::chrono::duration<double>(t3 - t2).count(), std::chrono::duration<double, std::milli>(t4 - t3).count() / 10,
        std::chrono::duration<double, std::milli>(t5 - t4).count() / 10, sampled);
    std::printf(
        "bench_snapshot: %zu entries, %zu frames: read %.3f s + analyse %.3f s = %.3f s; peak RSS %.1f MiB; "
        "peak allocated %.1f MiB, %zu allocations at the peak\n",
        snap.trace_entries(), snap.frame_count(), read_s, analyse_s, read_s + analyse_s, peak_rss_kib() / 1024.0,
        a.peak_allocated_bytes / 1048576.0, a.devices.empty() ? size_t(0) : a.devices[0].at_peak.size());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    size_t entries = 1000000;
    std::string keep;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--read") && i + 1 < argc) return read_and_analyse(argv[i + 1]);
        if (!std::strcmp(argv[i], "--entries") && i + 1 < argc)
            entries = std::stoull(argv[++i]);
        else if (!std::strcmp(argv[i], "--keep") && i + 1 < argc)
            keep = argv[++i];
        else
            return std::fprintf(stderr, "usage: bench_snapshot [--entries N] [--keep FILE]\n"), 2;
    }
    const std::string path =
        keep.empty()
            ? (std::filesystem::temp_directory_path() / ("bench_snapshot_" + std::to_string(getpid()) + ".pickle"))
                  .string()
            : keep;
    {
        const std::string bytes = generate(entries);
        std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
        std::printf("bench_snapshot: wrote %s (%.1f MiB, protocol 4)\n", path.c_str(), bytes.size() / 1048576.0);
    }
    // A fresh process reads it, so its peak RSS is the reader's alone.
    std::fflush(stdout);
    const pid_t child = fork();
    if (child == 0) {
        execl("/proc/self/exe", argv[0], "--read", path.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    int status = 0;
    waitpid(child, &status, 0);
    if (keep.empty()) std::filesystem::remove(path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
