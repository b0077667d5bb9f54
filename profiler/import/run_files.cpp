// Finding and loading a run's files (run_files.h).
#include "profiler/import/run_files.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <string_view>

#include "common/core/check.h"
#include "profiler/import/byte_source.h"
#include "profiler/import/memory_timeline.h"
#include "profiler/import/one_run.h"
#include "profiler/import/rank_file.h"

namespace us::prof {

namespace fs = std::filesystem;

bool is_ultrascope_trace(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    char magic[8] = {};
    in.read(magic, 8);
    return in.gcount() == 8 && std::memcmp(magic, "USTRACE\0", 8) == 0;
}

namespace {

bool is_kineto_name(const fs::path& p) {
    const std::string n = p.filename().string();
    auto ends = [&](std::string_view s) {
        return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
    };
    return ends(".json") || ends(".json.gz");
}

// The N of a torchtitan "iteration_N" folder, or -1.
long iteration_of(const fs::path& dir) {
    const std::string n = dir.filename().string();
    if (n.rfind("iteration_", 0) != 0 || n.size() == 10) return -1;
    long v = 0;
    for (size_t i = 10; i < n.size(); ++i) {
        if (!std::isdigit(uint8_t(n[i])) || v > 100000000) return -1;
        v = v * 10 + (n[i] - '0');
    }
    return v;
}

// Whether the first MiB of the file (uncompressed) holds "traceEvents"; false when it cannot be read.
bool mentions_trace_events(const std::string& path) {
    try {
        // Read in small pieces, stopping where it is found: usually in the first few KB (a run's thousands of
        // files are each checked before any is read whole).
        static constexpr std::string_view key = "\"traceEvents\"";
        ByteSource source(path);
        std::string head;
        for (size_t piece = 16 << 10; head.size() < (size_t(1) << 20); piece *= 2) {
            const size_t before = head.size();
            head.resize(before + piece);
            const size_t got = source.read(head.data() + before, piece);
            head.resize(before + got);
            if (head.find(key, before >= key.size() ? before - key.size() : 0) != std::string::npos) return true;
            if (got == 0) break;
        }
        return false;
    } catch (const UserError&) {
        return true;  // damaged: let the reader say what is wrong with it
    }
}

// tensorboard_trace_handler's name, <worker>.<time in ns>.pt.trace.json(.gz) (the worker: host_pid, one per rank):
// the worker and the time, or an empty worker for any other name.
std::pair<std::string, std::string> worker_and_time(const fs::path& p) {
    std::string n = p.filename().string();
    for (std::string_view tail : {".pt.trace.json.gz", ".pt.trace.json"})
        if (n.size() > tail.size() && n.compare(n.size() - tail.size(), tail.size(), tail) == 0) {
            n.resize(n.size() - tail.size());
            const size_t dot = n.rfind('.');
            if (dot == std::string::npos || dot == 0 || n.size() - dot - 1 < 10) return {};
            const std::string time = n.substr(dot + 1);
            if (!std::all_of(time.begin(), time.end(), [](char c) { return std::isdigit(uint8_t(c)); })) return {};
            return {(p.parent_path() / n.substr(0, dot)).string(), time};
        }
    return {};
}

// A profiler schedule with several cycles (repeat, or torch's default of 0: until the profiler stops) writes one file
// per cycle per rank: each rank's newest is kept (one cycle of the run, not ranks of different cycles), and said.
void keep_newest_cycle(const fs::path& dir, std::vector<fs::path>& files, RunFiles& out) {
    std::map<std::string, std::vector<std::pair<std::string, size_t>>> by_worker;  // worker -> (time, index)
    for (size_t i = 0; i < files.size(); ++i)
        if (auto [worker, time] = worker_and_time(files[i]); !worker.empty())
            by_worker[worker].push_back({std::string(20 - std::min<size_t>(20, time.size()), '0') + time, i});
    size_t most = 0;
    for (const auto& [worker, cycles] : by_worker) most = std::max(most, cycles.size());
    // One worker name for every rank (tensorboard_trace_handler(worker_name=...)): its files are ranks, not cycles.
    if (most < 2 || by_worker.size() < 2) return;
    std::vector<bool> dropped(files.size(), false);
    for (auto& [worker, cycles] : by_worker) {
        std::sort(cycles.begin(), cycles.end());
        for (size_t k = 0; k + 1 < cycles.size(); ++k) dropped[cycles[k].second] = true;
    }
    std::vector<fs::path> kept;
    for (size_t i = 0; i < files.size(); ++i)
        if (!dropped[i]) kept.push_back(files[i]);
    out.warnings.push_back(fmt::format(
        "{} holds up to {} profiled cycles per rank (tensorboard_trace_handler's <worker>.<time>.pt.trace.json, one "
        "file a cycle of the profiler's schedule): opened each rank's newest, {} files; open another cycle by naming "
        "its files",
        dir.string(), most, kept.size()));
    files = std::move(kept);
}

void collect_dir(const fs::path& dir, RunFiles& out) {
    // torchtitan writes one folder per profiled iteration: take the newest, and say so.
    std::map<long, fs::path> iterations;
    std::vector<fs::path> files;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (it->is_directory()) {
            if (const long n = iteration_of(it->path()); n >= 0) iterations[n] = it->path();
        } else if (it->is_regular_file() && (is_kineto_name(it->path()) || it->path().extension() == ".ustrace")) {
            files.push_back(it->path());
        }
    }
    US_CHECK_INPUT(!ec, "cannot list '{}': {}", dir.string(), ec.message());
    if (iterations.size() > 1) {
        const fs::path newest = iterations.rbegin()->second;
        std::erase_if(files, [&](const fs::path& f) {
            const std::string s = f.string();
            return s.rfind(newest.string() + "/", 0) != 0;
        });
        out.warnings.push_back(
            fmt::format("{} holds {} profiled iterations: opened the newest, {} (open another "
                        "by naming its folder)",
                        dir.string(), iterations.size(), newest.filename().string()));
    }
    std::sort(files.begin(), files.end());
    keep_newest_cycle(dir, files, out);
    for (const auto& f : files) {
        if (is_memory_timeline_file(f.string(), false)) continue;  // read beside the trace (memory_timeline.h)
        // Output folders hold other JSON too (settings, memory timelines): a trace says "traceEvents" early.
        if (f.extension() != ".ustrace" && !mentions_trace_events(f.string())) {
            out.warnings.push_back(
                fmt::format("{}: skipped, not a PyTorch profiler trace (no traceEvents near its start)", f.string()));
            continue;
        }
        out.files.push_back(f.string());
    }
}

}  // namespace

RunFiles find_run_files(const std::vector<std::string>& paths) {
    US_CHECK_INPUT(!paths.empty(), "no trace named: give a .ustrace file, Kineto .json(.gz) files or a folder of them");
    RunFiles out;
    for (const auto& p : paths) {
        US_CHECK_INPUT(fs::exists(p), "'{}': no such file or folder", p);
        if (fs::is_directory(p)) {
            const size_t before = out.files.size();
            collect_dir(p, out);
            US_CHECK_INPUT(out.files.size() > before,
                           "'{}' holds no trace: expected a .ustrace file or PyTorch profiler traces (.json, .json.gz)",
                           p);
        } else if (!is_memory_timeline_file(p, true)) {  // a timeline named beside the trace is not a trace
            out.files.push_back(p);
        }
    }
    US_CHECK_INPUT(!out.files.empty(),
                   "the command line names memory timelines only: name the run's trace (or its "
                   "folder) beside them");
    size_t ultrascope = 0;
    // A .ustrace name goes to the Ultrascope reader whatever it holds (it says what is wrong with it).
    for (const auto& f : out.files) ultrascope += is_ultrascope_trace(f) || fs::path(f).extension() == ".ustrace";
    if (ultrascope > 0) {
        US_CHECK_INPUT(out.files.size() == 1,
                       "{} names {} files, {} of them Ultrascope traces: open one Ultrascope trace at a time, or "
                       "Kineto files only",
                       paths.size() == 1 ? "'" + paths[0] + "'" : std::string("the command line"), out.files.size(),
                       ultrascope);
        out.ultrascope = true;
    }
    return out;
}

std::vector<std::string> load_run(const std::vector<std::string>& paths, TraceStore& store,
                                  std::vector<KinetoMemoryEvents>* memory) {
    RunFiles run = find_run_files(paths);
    if (run.ultrascope) {
        auto warnings = load_trace(run.files[0], store);
        warnings.insert(warnings.begin(), run.warnings.begin(), run.warnings.end());
        return warnings;
    }
    std::vector<std::string> warnings = run.warnings;
    RankClaims claims;
    for (const auto& path : run.files) {
        // One rank at a time, as the GUI's workers read them (rank_file.h): its parsed events are freed before the
        // next file is read.
        RankFile rank = read_rank_file(path, run.files.size(), store.options(), claims);
        warnings.insert(warnings.end(), rank.warnings.begin(), rank.warnings.end());
        store.merge(std::move(*rank.store));
        if (memory && !rank.memory.events.empty()) memory->push_back(std::move(rank.memory));
    }
    store.finalize();
    if (OneRunCheck check = first_not_one_run(rank_windows(store)); !check.said.empty()) {
        if (check.two_runs) throw UserError(check.said);
        warnings.push_back(std::move(check.said));
    }
    return warnings;
}

}  // namespace us::prof
