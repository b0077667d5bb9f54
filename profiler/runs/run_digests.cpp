// A run's rank files reduced to digests on worker threads, with their cache (run_digests.h).
#include "profiler/runs/run_digests.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "common/core/check.h"
#include "profiler/import/byte_source.h"
#include "profiler/import/rank_file.h"
#include "profiler/import/run_files.h"

namespace us::prof {

namespace fs = std::filesystem;

namespace {

// What a cached digest must match: the trace it was made from, unchanged.
struct FileKey {
    uint64_t size = 0;
    int64_t mtime_ns = 0;
};

bool file_key(const std::string& path, FileKey& key) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return false;
    key.size = uint64_t(st.st_size);
    key.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    return true;
}

// A cached digest file: magic, the key, the digest's compact bytes (rank_digest.h).
constexpr char kMagic[8] = {'U', 'S', 'D', 'I', 'G', 'E', 'S', 'T'};

std::optional<RankDigest> read_cached(const std::string& cache, const FileKey& key) {
    std::ifstream in(cache, std::ios::binary);
    if (!in) return std::nullopt;
    char magic[8];
    FileKey stored;
    int32_t version = 0;
    in.read(magic, 8);
    in.read(reinterpret_cast<char*>(&version), sizeof version);
    in.read(reinterpret_cast<char*>(&stored.size), sizeof stored.size);
    in.read(reinterpret_cast<char*>(&stored.mtime_ns), sizeof stored.mtime_ns);
    if (!in || std::memcmp(magic, kMagic, 8) != 0 || version != RankDigest::kVersion || stored.size != key.size ||
        stored.mtime_ns != key.mtime_ns)
        return std::nullopt;
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    try {
        return digest_from_bytes(bytes, cache);
    } catch (const UserError&) {
        return std::nullopt;  // damaged: made again from the trace
    }
}

// Written whole or not at all (a temporary file renamed); a cache that cannot be written is no error.
bool write_cached(const std::string& cache, const FileKey& key, const std::string& bytes) {
    std::error_code ec;
    fs::create_directories(fs::path(cache).parent_path(), ec);
    const std::string tmp = fmt::format("{}.tmp.{}", cache, ::getpid());
    {
        std::ofstream out(tmp, std::ios::binary);
        if (!out) return false;
        const int32_t version = RankDigest::kVersion;
        out.write(kMagic, 8);
        out.write(reinterpret_cast<const char*>(&version), sizeof version);
        out.write(reinterpret_cast<const char*>(&key.size), sizeof key.size);
        out.write(reinterpret_cast<const char*>(&key.mtime_ns), sizeof key.mtime_ns);
        out.write(bytes.data(), std::streamsize(bytes.size()));
        if (!out) {
            fs::remove(tmp, ec);
            return false;
        }
    }
    fs::rename(tmp, cache, ec);
    if (ec) fs::remove(tmp, ec);
    return !ec;
}

std::string user_cache_dir() {
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/ultrascope/digests";
    if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/ultrascope/digests";
    return "/tmp/ultrascope-digests";
}

bool writable_dir(const fs::path& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    return !ec && ::access(dir.c_str(), W_OK) == 0;
}

// A file from another run among a run's files (copied into the wrong folder): its world size is not the others'.
// Named and left out; the run is what most files say.
void leave_out_other_runs(RunDigests& out) {
    std::map<int, int> sizes;
    for (const RankDigest& d : out.ranks)
        if (d.world_size > 0) ++sizes[d.world_size];
    if (sizes.size() < 2) return;
    const int world =
        std::max_element(sizes.begin(), sizes.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
    std::erase_if(out.ranks, [&](const RankDigest& d) {
        if (d.world_size <= 0 || d.world_size == world) return false;
        out.errors.push_back(
            fmt::format("'{}': rank {} says a world of {} ranks where the run's other files say {}: "
                        "from another run? left out",
                        d.file, d.rank, d.world_size, world));
        return true;
    });
}

}  // namespace

std::string digest_cache_path(const std::string& trace, const std::string& cache_dir) {
    const fs::path path = fs::absolute(trace);
    const fs::path beside = path.parent_path() / ".ultrascope-digests";
    if (writable_dir(beside)) return (beside / (path.filename().string() + ".usdigest")).string();
    const std::string dir = cache_dir.empty() ? user_cache_dir() : cache_dir;
    return fmt::format("{}/{:016x}-{}.usdigest", dir, std::hash<std::string>{}(path.string()),
                       path.filename().string());
}

namespace {

// The engine's trace: every rank in one file, digested from one store.
void digest_engine_trace(const std::string& path, const DigestOptions& options, RunDigests& out) {
    TraceStore store(options.store);
    const auto w = load_trace(path, store);
    out.warnings.insert(out.warnings.end(), w.begin(), w.end());
    for (int r : store.ranks()) out.ranks.push_back(make_digest(store, r));
    out.made = out.ranks.size();
    FileKey key;
    if (file_key(path, key)) out.trace_bytes = key.size;
}

// One rank file's digest, from the cache when it holds this file unchanged, else from the file (one rank's spans in
// memory, dropped once digested; the digest is cached). A file that fails is an error entry naming it.
void digest_rank_file(const std::string& path, size_t run_files, const DigestOptions& options, RankClaims& claims,
                      std::mutex& mutex, RunDigests& out) {
    try {
        FileKey key;
        US_CHECK_INPUT(file_key(path, key), "'{}': cannot read it", path);
        const std::string cache = options.use_cache ? digest_cache_path(path, options.cache_dir) : "";
        std::optional<RankDigest> d = cache.empty() ? std::nullopt : read_cached(cache, key);
        std::vector<std::string> warnings;
        const bool cached = d.has_value();
        if (!cached) {
            RankFile rank =
                read_rank_file(path, run_files, options.store, claims, nullptr, nullptr, MemoryEvents::skip);
            d = make_digest(*rank.store, rank.rank);
            d->file = path, d->file_bytes = key.size, d->file_mtime_ns = key.mtime_ns;
            warnings = std::move(rank.warnings);
            if (!cache.empty()) write_cached(cache, key, digest_bytes(*d));
        } else {
            claims.claim(d->rank, path);
        }
        const uint64_t size = digest_bytes(*d).size();
        std::lock_guard lock(mutex);
        out.warnings.insert(out.warnings.end(), warnings.begin(), warnings.end());
        out.trace_bytes += key.size;
        out.digest_bytes += size;
        ++(cached ? out.from_cache : out.made);
        out.ranks.push_back(std::move(*d));
    } catch (const UserError& e) {
        const std::string what = e.what();
        std::lock_guard lock(mutex);
        out.errors.push_back(what.find(path) != std::string::npos ? what : fmt::format("'{}': {}", path, what));
    } catch (const std::exception& e) {
        std::lock_guard lock(mutex);
        out.errors.push_back(fmt::format("cannot read '{}': {}", path, e.what()));
    }
}

// This worker's share of a run of rank files (file i when i % workers == worker), on as many threads as asked.
void digest_rank_files(const RunFiles& run, const DigestOptions& options, int worker, int workers, RunDigests& out) {
    std::vector<std::string> mine;
    for (size_t i = 0; i < run.files.size(); ++i)
        if (int(i % size_t(std::max(1, workers))) == worker) mine.push_back(run.files[i]);
    const int threads =
        std::clamp<int>(options.threads > 0 ? options.threads : int(std::thread::hardware_concurrency()), 1,
                        std::max<int>(1, int(mine.size())));
    std::atomic<size_t> next{0};
    std::mutex mutex;
    RankClaims claims;
    auto work = [&] {
        for (size_t i; (i = next.fetch_add(1)) < mine.size();) {
            if (options.cancel && options.cancel->load()) break;
            struct Count {  // however the file ends
                std::atomic<size_t>* done;
                ~Count() {
                    if (done) done->fetch_add(1);
                }
            } count{options.files_done};
            digest_rank_file(mine[i], run.files.size(), options, claims, mutex, out);
        }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
}

}  // namespace

RunDigests digest_run(const std::vector<std::string>& paths, const DigestOptions& options, int worker, int workers) {
    const auto t0 = std::chrono::steady_clock::now();
    RunDigests out;
    const RunFiles run = find_run_files(paths);
    out.warnings = run.warnings;
    if (run.ultrascope)
        digest_engine_trace(run.files[0], options, out);
    else
        digest_rank_files(run, options, worker, workers, out);
    std::sort(out.ranks.begin(), out.ranks.end(),
              [](const RankDigest& a, const RankDigest& b) { return a.rank < b.rank; });
    leave_out_other_runs(out);
    std::sort(out.errors.begin(), out.errors.end());
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

}  // namespace us::prof
