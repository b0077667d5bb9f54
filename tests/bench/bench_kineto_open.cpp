// Opening a multi-rank PyTorch run the way the GUI does (prof::ProgressiveLoad, driven as app/gui/state/data_source.cpp
// drives it): writes RANKS synthetic rank files of SIZE MB of JSON each (gzip, the generator of bench_kineto_read),
// then opens them with the GUI's loader, a 30 Hz loop standing for the frames merging finished ranks into the shown
// store, and prints the time until the first rank is drawable, until every rank is in, the longest merge on the
// frame thread, and the peak RSS; then the same files through load_run (one thread: `ultrascope report`).
//   bench_kineto_open [RANKS] [SIZE_MB] [DIR] [--keep] [--write-only] [--workers N]
// Files in DIR are reused when present; --keep leaves them; --write-only writes them and stops (bench_vs_hta.py's
// --synthetic mode reads them with HTA).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "bench_timing.h"
#include "kineto_synth.h"
#include "profiler/import/progressive_load.h"
#include "profiler/import/run_files.h"

namespace {

double status_mib(const char* key) {  // from /proc/self/status, MiB
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(key, 0) == 0) return std::atof(line.c_str() + std::strlen(key)) / 1024.0;
    return 0;
}

void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }  // VmHWM starts again from VmRSS

}  // namespace

int main(int argc, char** argv) {
    namespace fs = std::filesystem;
    const int ranks = argc > 1 ? std::atoi(argv[1]) : 16;
    const double mb = argc > 2 ? std::atof(argv[2]) : 100;
    const std::string dir =
        argc > 3 && argv[3][0] != '-' ? argv[3] : (fs::temp_directory_path() / "bench_kineto_open").string();
    bool keep = false, write_only = false;
    int workers = 0;  // 0: the GUI's choice
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--workers") == 0 && i + 1 < argc) workers = std::atoi(argv[i + 1]);
        keep |= std::strcmp(argv[i], "--keep") == 0;
        write_only |= std::strcmp(argv[i], "--write-only") == 0;
    }
    fs::create_directories(dir);
    double json_mb = 0;
    const double t_gen = us::bench::seconds_now();
    for (int r = 0; r < ranks; ++r) {
        const std::string gz = dir + "/rank" + std::to_string(r) + "_trace.json.gz";
        const std::string size_note = gz + ".json_bytes";  // the JSON size of a file written earlier
        if (!fs::exists(gz) || !fs::exists(size_note)) {
            const std::string plain = dir + "/rank.json.tmp";
            us::bench::write_kineto_rank(plain, gz, mb, r, ranks);
            std::ofstream(size_note) << fs::file_size(plain);
            fs::remove(plain);
        }
        std::ifstream note(size_note);
        double bytes = 0;
        note >> bytes;
        json_mb += bytes / 1e6;
    }
    uint64_t gz_bytes = 0;
    for (int r = 0; r < ranks; ++r) gz_bytes += fs::file_size(dir + "/rank" + std::to_string(r) + "_trace.json.gz");
    std::printf("%d synthetic Kineto rank files in %s: %.0f MB of JSON (%.0f MB gzip), written in %.1f s\n", ranks,
                dir.c_str(), json_mb, double(gz_bytes) / 1e6, us::bench::seconds_now() - t_gen);
    std::printf("machine: %u hardware threads\n", std::thread::hardware_concurrency());
    std::fflush(stdout);
    if (write_only) return 0;

    {  // the GUI's way
        reset_peak_rss();
        const double rss0 = status_mib("VmRSS:");
        us::prof::TraceStore shown;
        const double t0 = us::bench::seconds_now();
        us::prof::ProgressiveLoad load({dir}, {}, workers);
        double first = -1, longest_merge_ms = 0;
        int frames = 0;
        for (;;) {
            const bool finished = load.finished();
            const double m0 = us::bench::seconds_now();
            load.take_ready(shown);
            longest_merge_ms = std::max(longest_merge_ms, (us::bench::seconds_now() - m0) * 1e3);
            if (first < 0 && shown.rank_count() > 0) first = us::bench::seconds_now() - t0;
            if (finished) break;
            ++frames;
            std::this_thread::sleep_for(std::chrono::milliseconds(33));
        }
        const double all = us::bench::seconds_now() - t0;
        const auto p = load.progress();
        for (const auto& e : load.take_errors()) std::printf("error: %s\n", e.c_str());
        std::printf(
            "GUI loader (ProgressiveLoad, %u workers): first rank drawable after %.2f s, all %zu ranks in after "
            "%.2f s (%.0f MB of JSON a second); longest merge on the frame thread %.1f ms over %d frames; "
            "%zu spans, store %.0f MiB; peak RSS %.0f MiB (%.0f before) = %.2f x the JSON of one rank, %.2f x "
            "the whole run's JSON\n",
            workers > 0 ? unsigned(std::min(workers, ranks))
                        : std::min({std::thread::hardware_concurrency(), 4u, unsigned(ranks)}),
            first, p.ranks_shown, all, json_mb / all, longest_merge_ms, frames, shown.span_count(),
            double(shown.bytes_used()) / 1048576.0, status_mib("VmHWM:"), rss0,
            status_mib("VmHWM:") / (json_mb / ranks * 1e6 / 1048576.0),
            status_mib("VmHWM:") / (json_mb * 1e6 / 1048576.0));
        std::fflush(stdout);
    }
    {  // `ultrascope report`'s way: one file after the other on one thread, shown when all are read
        reset_peak_rss();
        us::prof::TraceStore store;
        const double t0 = us::bench::seconds_now();
        us::prof::load_run({dir}, store);
        const double all = us::bench::seconds_now() - t0;
        std::printf(
            "load_run (one thread, nothing shown until the end): all ranks in after %.2f s (%.0f MB of JSON a "
            "second); peak RSS %.0f MiB\n",
            all, json_mb / all, status_mib("VmHWM:"));
    }
    if (!keep) fs::remove_all(dir);
    return 0;
}
