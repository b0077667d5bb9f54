// finish_capture (captured_rank.h): every raw trace read through and its steps checked first, then the rank files
// written under temporary names and renamed together, so that a failure leaves nothing behind in the folder.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "common/core/check.h"
#include "profiler/capture/captured_rank.h"
#include "profiler/capture/rank_writer.h"
#include "profiler/capture/step_check.h"

namespace us::capture {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPartial = ".partial";  // not .json: a folder reader opening DIR meanwhile skips it

void check_ranks(const std::vector<CapturedRank>& ranks) {
    US_CHECK_INPUT(!ranks.empty(), "no rank to capture: the job has no rank polling this agent");
    std::set<int> seen;
    for (const CapturedRank& r : ranks) {
        US_CHECK_INPUT(r.world_size > 0 && r.rank >= 0 && r.rank < r.world_size,
                       "pid {} on {}: rank {} of world size {} is not a rank (is RANK/WORLD_SIZE set in its "
                       "environment?)",
                       r.pid, r.host, r.rank, r.world_size);
        US_CHECK_INPUT(r.world_size == ranks.front().world_size,
                       "pid {} on {} says world size {}, pid {} on {} says {}: these are not ranks of one job", r.pid,
                       r.host, r.world_size, ranks.front().pid, ranks.front().host, ranks.front().world_size);
        US_CHECK_INPUT(seen.insert(r.rank).second,
                       "rank {} was captured twice (pid {} on {}): capture one job at a time", r.rank, r.pid, r.host);
        US_CHECK_INPUT(!r.raw_trace.empty() || !r.raw_bytes.empty(), "rank {} (pid {} on {}) has no trace file", r.rank,
                       r.pid, r.host);
    }
}

// A trace that names its own rank (a job that also runs torch.profiler) must agree with the process's environment:
// the file is named, and the run read, by it.
void check_own_rank(const RawTrace& t, const CapturedRank& r) {
    const nlohmann::json& d = t.distributed_info;
    if (!d.is_object()) return;
    auto says = [&](const char* key, int want) {
        US_CHECK_INPUT(!d.contains(key) || !d[key].is_number_integer() || d[key].get<int>() == want,
                       "'{}' says {} {} in its distributedInfo, but its process (pid {} on {}) has {} in its "
                       "environment: is this the file of another job?",
                       t.path, key, d[key].dump(), r.pid, r.host, want);
    };
    says("rank", r.rank);
    says("world_size", r.world_size);
}

// The host as it may stand in a file name.
std::string file_safe(const std::string& host) {
    std::string s = host.empty() ? "host" : host;
    for (char& c : s)
        if (!std::isalnum(uint8_t(c)) && c != '-' && c != '_' && c != '.') c = '_';
    return s;
}

bool is_trace_name(const std::string& name) {
    auto ends = [&](std::string_view e) { return name.size() >= e.size() && name.ends_with(e); };
    return ends(".json") || ends(".json.gz") || ends(".ustrace");
}

// Refuses a folder that holds trace files this capture does not write: opened together, they would be one run.
void check_out_dir(const fs::path& dir, const std::set<std::string>& ours, const std::vector<CapturedRank>& ranks) {
    std::error_code ec;
    if (!fs::exists(dir, ec)) return;
    US_CHECK_INPUT(fs::is_directory(dir, ec), "'{}' is not a folder: give a folder for the rank files", dir.string());
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (!is_trace_name(name) || ours.count(name)) continue;
        for (const CapturedRank& r : ranks)
            US_CHECK_INPUT(
                !fs::equivalent(entry.path(), r.raw_trace, ec),
                "rank {}'s raw trace '{}' is in the folder of rank files '{}': keep the raw traces elsewhere "
                "(opened with the folder, they would read as ranks again)",
                r.rank, r.raw_trace, dir.string());
        fail_user("'{}' already holds '{}', a trace of another run: give an empty folder (each capture its own)",
                  dir.string(), name);
    }
}

std::string summary_message(const std::vector<std::string>& files, const std::vector<CapturedRank>& ranks,
                            const fs::path& dir, const StepCheck& check) {
    std::set<std::string> hosts;
    for (const CapturedRank& r : ranks) hosts.insert(r.host);
    std::string m = fmt::format("wrote {} rank file{} ({} host{}) to {}: ", files.size(), files.size() == 1 ? "" : "s",
                                hosts.size(), hosts.size() == 1 ? "" : "s", dir.string());
    if (check.same)
        return m + fmt::format("{} step{} on every rank, the same steps (each step overlaps on every rank)",
                               check.steps, check.steps == 1 ? "" : "s");
    return m + "the ranks did not capture the same steps:\n" + check.what;
}

}  // namespace

CaptureSummary finish_capture(const std::vector<CapturedRank>& ranks_given, const std::string& out_dir,
                              const std::string& shown_dir) {
    check_ranks(ranks_given);
    std::vector<const CapturedRank*> ranks;  // in rank order (not copied: raw_bytes may be large)
    for (const CapturedRank& r : ranks_given) ranks.push_back(&r);
    std::sort(ranks.begin(), ranks.end(), [](auto* a, auto* b) { return a->rank < b->rank; });

    // Pass one: every trace read through before anything is written.
    std::vector<RawTrace> traces;
    std::vector<RankSteps> steps;
    for (const CapturedRank* rank : ranks) {
        const CapturedRank& r = *rank;
        const std::string name = r.raw_bytes.empty() || !r.raw_trace.empty()
                                     ? r.raw_trace
                                     : fmt::format("the trace of rank {} (pid {} on {})", r.rank, r.pid, r.host);
        try {
            traces.push_back(read_raw_trace(name, r.raw_bytes.empty() ? nullptr : &r.raw_bytes));
        } catch (const UserError& e) {
            fail_user("rank {} (pid {} on {}): {}; nothing was written to '{}': capture again", r.rank, r.pid, r.host,
                      e.what(), out_dir);
        }
        check_own_rank(traces.back(), r);
        steps.push_back({r.rank, derive_steps(traces.back()), traces.back().base_time_ns});
    }
    const StepCheck check = check_same_steps(steps);

    const fs::path dir(out_dir);
    std::vector<std::string> names;
    for (size_t i = 0; i < ranks.size(); ++i)
        names.push_back(fmt::format("rank{}.{}.pt.trace.json{}", ranks[i]->rank, file_safe(ranks[i]->host),
                                    traces[i].gzip ? ".gz" : ""));
    check_out_dir(dir, std::set<std::string>(names.begin(), names.end()), ranks_given);
    std::error_code ec;
    const bool made_dir = !fs::exists(dir, ec);
    fs::create_directories(dir, ec);
    US_CHECK_INPUT(!ec, "cannot create the folder '{}': {}", out_dir, ec.message());

    // Pass two: written under temporary names, renamed once every one is complete.
    CaptureSummary summary;
    try {
        for (size_t i = 0; i < ranks.size(); ++i)
            write_rank_file(traces[i], *ranks[i], steps[i].steps, (dir / (names[i] + kPartial)).string(),
                            traces[i].gzip);
        for (size_t i = 0; i < ranks.size(); ++i) {
            fs::rename(dir / (names[i] + kPartial), dir / names[i], ec);
            US_CHECK_INPUT(!ec, "cannot write '{}': {}", (dir / names[i]).string(), ec.message());
            summary.rank_files.push_back((dir / names[i]).string());
        }
    } catch (...) {
        for (size_t i = 0; i < ranks.size(); ++i) {
            fs::remove(dir / (names[i] + kPartial), ec);
            if (i < summary.rank_files.size()) fs::remove(dir / names[i], ec);
        }
        if (made_dir) fs::remove(dir, ec);  // only when empty
        throw;
    }
    summary.steps = check.steps;
    summary.same_steps = check.same;
    summary.message =
        summary_message(summary.rank_files, ranks_given, shown_dir.empty() ? dir : fs::path(shown_dir), check);
    return summary;
}

}  // namespace us::capture
