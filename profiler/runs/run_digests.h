// A run's rank files reduced to digests (profiler/analysis/rank_digest.h), as many at once as there are cores, each
// worker holding one rank's spans at a time, so that thousands of ranks fit in memory (docs/blame.md). A digest is
// kept beside its trace (in a .ultrascope-digests folder, or the user's cache when that cannot be written), keyed on
// the file's size and modification time, so that a second open reads digests only. The same call digests a share of
// the files on each of several workers (mpirun, srun: app/report_worker/report_workers.cpp gathers them).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "profiler/analysis/rank_digest.h"
#include "profiler/trace/trace_store.h"

namespace us::prof {

// Beyond this many rank files a run is reported, and opened in the GUI, from its digests unless ranks are asked for.
inline constexpr size_t kWholeRunRanks = 64;

struct DigestOptions {
    int threads = 0;          // workers; 0: one per core
    bool use_cache = true;    // read and write the digests beside the traces
    std::string cache_dir;    // where digests go when beside the trace cannot be written ("": the user's cache)
    TraceStoreOptions store;  // the run's cap, shared by its ranks as when a run is opened whole (rank_file.h)
    std::atomic<size_t>* files_done = nullptr;  // counts the files digested (or failed), for a progress bar
    std::atomic<bool>* cancel = nullptr;        // when set, no further file is started
};

struct RunDigests {
    std::vector<RankDigest> ranks;      // by rank
    std::vector<std::string> warnings;  // as load_run's (the reader's), plus the cache's
    std::vector<std::string> errors;    // one per file that could not be read, naming it; the rest are analysed
    size_t from_cache = 0, made = 0;    // digests read from the cache, and made from their traces now
    uint64_t trace_bytes = 0;           // on disk, every file
    uint64_t digest_bytes = 0;          // the digests' compact size
    double seconds = 0;
};

// The digests of the run named by `paths` (a folder of Kineto files, the files, or one Ultrascope trace, whose
// ranks are digested from the one store). Of a run of Kineto files, only the files of `share` (worker, workers) are
// read: file i when i % workers == worker (in sorted order), so that workers split a run without talking.
// Throws UserError when nothing is named; a file that fails is an error entry and the rest go on.
RunDigests digest_run(const std::vector<std::string>& paths, const DigestOptions& options, int worker = 0,
                      int workers = 1);

// Where the cached digest of `trace` lives (beside it, else under `cache_dir`).
std::string digest_cache_path(const std::string& trace, const std::string& cache_dir);

}  // namespace us::prof
