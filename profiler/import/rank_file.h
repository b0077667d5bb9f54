// One file of a run read as one rank, the same way wherever a run is opened: `report`, `export` and the other
// commands (load_run, run_files.h) read their files one after the other through it, the GUI's progressive loader
// schedules it on worker threads (progressive_load.h). One parse per file: the spans go into a trace store of the
// rank's own, and the [memory] events, with the categories their ops suggest, come along for the memory views.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "profiler/import/kineto_memory_ops.h"
#include "profiler/trace/trace_store.h"

namespace us::prof {

struct RankFile {
    std::string path;
    int rank = -1;
    std::unique_ptr<TraceStore> store;  // the rank, finalized
    KinetoMemoryEvents memory;          // its [memory] events (none in a trace recorded without profile_memory)
    std::vector<std::string> warnings;
};

// The ranks the files of one run claim: a second file of a rank is refused, naming both, before it is ingested.
// Safe to share between worker threads.
class RankClaims {
public:
    void claim(int rank, const std::string& path);

private:
    std::mutex m_mutex;
    std::map<int, std::string> m_file_of_rank;
};

// What a rank's own store may hold: the run's cap shared evenly by its `files` files, so that the order ranks are
// read in does not decide which keep their op spans (report and GUI alike).
TraceStoreOptions rank_store_options(const TraceStoreOptions& run, size_t files);

// Reads the Kineto file `path` as one rank of a run of `files` files (a file that names no rank is rank 0 when it is
// the only one). `bytes_read` counts the file's bytes as they are consumed, `cancel` stops the read within 256 KiB
// (LoadCancelled). Throws UserError naming the file when it is damaged, says no rank, or claims one already taken.
// `memory`: whether its [memory] events are placed under their ops (RankFile::memory); a digest has no use for them.
enum class MemoryEvents { read, skip };
RankFile read_rank_file(const std::string& path, size_t files, const TraceStoreOptions& options, RankClaims& claims,
                        std::atomic<uint64_t>* bytes_read = nullptr, const std::atomic<bool>* cancel = nullptr,
                        MemoryEvents memory = MemoryEvents::read);

}  // namespace us::prof
