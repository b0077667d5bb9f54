// Finding, naming and reading a hung job's dumps (dump_files.h).
#include "profiler/hang/dump_files.h"

#include <fmt/format.h>
#include <glob.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <thread>

#include "common/core/check.h"
#include "profiler/hang/flight_reader.h"

namespace us::hang {
namespace fs = std::filesystem;

namespace {

bool is_glob(const std::string& p) { return p.find_first_of("*?[") != std::string::npos; }

// A file name with its runs of digits as '#': "comm_lib_trace_rank_12" -> "comm_lib_trace_rank_#".
std::string name_pattern(const std::string& path) {
    std::string out;
    for (const char c : fs::path(path).filename().string())
        if (!std::isdigit(uint8_t(c)))
            out += c;
        else if (out.empty() || out.back() != '#')
            out += '#';
    return out;
}

void add_folder(const std::string& dir, std::vector<std::string>& out) {
    std::vector<std::string> found, others;
    for (const auto& entry : fs::directory_iterator(dir)) {
        if (!entry.is_regular_file()) continue;
        const std::string path = entry.path().string();
        (looks_like_flight_dump(path) ? found : others).push_back(path);
    }
    US_CHECK_INPUT(!found.empty(),
                   "{}: no Flight Recorder dump in this folder (a dump is the pickle or JSON torch "
                   "writes per rank: docs/hangs.md says how to get them)",
                   dir);
    // A file named as the dumps are but not one (empty, cut short: a rank that died writing it) is read too, so
    // that the report names it and why, rather than say its rank left no dump.
    std::vector<std::string> patterns;
    for (const std::string& f : found) patterns.push_back(name_pattern(f));
    for (const std::string& f : others)
        if (std::find(patterns.begin(), patterns.end(), name_pattern(f)) != patterns.end()) found.push_back(f);
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
}

// Name words PyTorch's default dump names use, which are not a host.
bool prefix_word(const std::string& w) {
    static const char* words[] = {"comm",   "lib",      "trace",  "nccl", "gloo", "fr", "dump",  "rank",
                                  "flight", "recorder", "pickle", "pkl",  "json", "gz", "torch", "debug"};
    for (const char* x : words)
        if (w == x) return true;
    return w.empty() || std::all_of(w.begin(), w.end(), [](char c) { return std::isdigit(uint8_t(c)); });
}

}  // namespace

std::vector<std::string> find_dump_files(const std::vector<std::string>& paths) {
    std::vector<std::string> files;
    for (const std::string& p : paths) {
        if (is_glob(p) && !fs::exists(p)) {
            glob_t g{};
            const int rc = ::glob(p.c_str(), 0, nullptr, &g);
            std::vector<std::string> matched(g.gl_pathv, g.gl_pathv + (rc == 0 ? g.gl_pathc : 0));
            ::globfree(&g);
            US_CHECK_INPUT(!matched.empty(), "{}: the pattern matches no file", p);
            for (const std::string& m : matched)
                if (fs::is_regular_file(m)) files.push_back(m);
        } else if (fs::is_directory(p)) {
            add_folder(p, files);
        } else {
            US_CHECK_INPUT(fs::exists(p), "{}: no such file or folder", p);
            files.push_back(p);
        }
    }
    return files;
}

bool names_flight_dumps(const std::string& path) {
    std::error_code ec;
    if (is_glob(path) && !fs::exists(path, ec)) {
        glob_t g{};  // its first few matches, as a folder's first files: one empty dump does not hide the rest
        bool dumps = false;
        if (::glob(path.c_str(), 0, nullptr, &g) == 0)
            for (size_t i = 0; i < g.gl_pathc && i < 8 && !dumps; ++i) dumps = looks_like_flight_dump(g.gl_pathv[i]);
        ::globfree(&g);
        return dumps;
    }
    if (fs::is_directory(path, ec)) {
        int looked = 0;
        for (const auto& entry : fs::directory_iterator(path, ec)) {
            if (!entry.is_regular_file() || ++looked > 8) continue;
            if (looks_like_flight_dump(entry.path().string())) return true;
        }
        return false;
    }
    return fs::is_regular_file(path, ec) && looks_like_flight_dump(path);
}

DumpNameParts dump_name_parts(const std::string& path) {
    DumpNameParts parts;
    std::string name = fs::path(path).filename().string();
    for (const char* ext : {".gz", ".json", ".pickle", ".pkl"})
        if (name.size() > std::strlen(ext) && name.ends_with(ext)) name.resize(name.size() - std::strlen(ext));
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    // The rank: the digits after "rank", else the last run of digits.
    size_t rank_begin = std::string::npos, rank_end = 0;
    for (size_t at = lower.find("rank"); at != std::string::npos && rank_begin == std::string::npos;
         at = lower.find("rank", at + 1)) {
        size_t i = at + 4;
        if (i < lower.size() && (lower[i] == '-' || lower[i] == '_' || lower[i] == '.')) ++i;
        size_t j = i;
        while (j < lower.size() && std::isdigit(uint8_t(lower[j]))) ++j;
        if (j > i && j - i <= 7) rank_begin = i, rank_end = j;
    }
    if (rank_begin == std::string::npos) {
        size_t j = lower.size();
        while (j > 0 && !std::isdigit(uint8_t(lower[j - 1]))) --j;
        size_t i = j;
        while (i > 0 && std::isdigit(uint8_t(lower[i - 1]))) --i;
        if (j > i && j - i <= 7) rank_begin = i, rank_end = j;
    }
    if (rank_begin == std::string::npos) return parts;
    parts.rank = std::stoi(lower.substr(rank_begin, rank_end - rank_begin));
    // The host: the name without the rank's digits, split at '_' and '.', PyTorch's words dropped; a host keeps
    // its '-' ("node-a").
    std::string rest = name.substr(0, rank_begin) + "_" + name.substr(rank_end);
    std::string host, word;
    auto flush = [&] {
        std::string lw = word;
        std::transform(lw.begin(), lw.end(), lw.begin(), [](unsigned char c) { return char(std::tolower(c)); });
        if (lw.ends_with("rank")) lw.resize(lw.size() - 4), word.resize(word.size() - 4);
        while (!word.empty() && (word.back() == '-' || word.back() == '_')) word.pop_back(), lw.pop_back();
        if (!prefix_word(lw)) host += (host.empty() ? "" : ".") + word;
        word.clear();
    };
    for (char c : rest) {
        if (c == '_' || c == '.')
            flush();
        else
            word += c;
    }
    flush();
    parts.host = host;
    return parts;
}

DumpSet check_dumps(std::vector<flight::FlightDump> dumps) {
    DumpSet set;
    set.files = dumps.size();
    for (flight::FlightDump& d : dumps) {
        const DumpNameParts named = dump_name_parts(d.source);
        if (d.host.empty()) d.host = named.host;
        if (d.rank < 0) d.rank = named.rank;
    }
    std::stable_sort(dumps.begin(), dumps.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
    // The job: the version and comm library most dumps share; a dump of another is named and left out.
    std::map<std::string, int> jobs;
    for (const auto& d : dumps) ++jobs[d.version + " / " + d.comm_lib_version];
    std::string job;
    int most = 0;
    for (const auto& [key, n] : jobs)
        if (n > most) job = key, most = n;
    std::vector<int> another_job;
    for (flight::FlightDump& d : dumps) {
        if (d.rank < 0) {
            set.left_out.push_back(
                fmt::format("{}: left out: neither the dump nor its file name says its rank "
                            "(name it as torch does, <prefix><rank>)",
                            d.source));
        } else if (d.version + " / " + d.comm_lib_version != job) {
            set.left_out.push_back(
                fmt::format("{}: left out: another job's dump (version {}, comm library '{}', "
                            "where the other dumps have {})",
                            d.source, d.version, d.comm_lib_version, job));
            another_job.push_back(d.rank);
        } else if (!set.dumps.empty() && set.dumps.back().rank == d.rank) {
            set.left_out.push_back(
                fmt::format("{}: left out: rank {} is dumped twice (also {}): two jobs' dumps "
                            "mixed in one folder, or a copy?",
                            d.source, d.rank, set.dumps.back().source));
        } else {
            set.dumps.push_back(std::move(d));
        }
    }
    for (const int r : another_job)
        if (std::none_of(set.dumps.begin(), set.dumps.end(), [&](const auto& d) { return d.rank == r; }))
            set.another_jobs_ranks.push_back(r);
    std::sort(set.another_jobs_ranks.begin(), set.another_jobs_ranks.end());
    set.another_jobs_ranks.erase(std::unique(set.another_jobs_ranks.begin(), set.another_jobs_ranks.end()),
                                 set.another_jobs_ranks.end());
    return set;
}

DumpSet load_dumps(const std::vector<std::string>& files, unsigned threads, DumpReadProgress* progress) {
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    threads = std::min<unsigned>(threads, unsigned(std::max<size_t>(files.size(), 1)));
    std::vector<flight::FlightDump> dumps(files.size());
    std::vector<std::string> errors(files.size());
    std::atomic<size_t> next{0};
    auto work = [&] {
        for (size_t i; !(progress && progress->cancel) && (i = next.fetch_add(1)) < files.size();) {
            try {
                dumps[i] = load_flight_dump(files[i]);
            } catch (const std::exception& e) {
                errors[i] = e.what();
            }
            if (progress) ++progress->files_done;
        }
    };
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
    std::vector<flight::FlightDump> read;
    std::vector<std::string> unreadable;
    for (size_t i = 0; i < files.size(); ++i) {
        if (!errors[i].empty())
            unreadable.push_back(fmt::format("left out: {}", errors[i]));
        else
            read.push_back(std::move(dumps[i]));
    }
    DumpSet set = check_dumps(std::move(read));
    set.left_out.insert(set.left_out.begin(), unreadable.begin(), unreadable.end());
    set.files = files.size();
    return set;
}

}  // namespace us::hang
