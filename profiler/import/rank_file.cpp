// One file of a run read as one rank (rank_file.h).
#include "profiler/import/rank_file.h"

#include "common/core/check.h"
#include "profiler/import/byte_source.h"
#include "profiler/import/kineto_parse.h"
#include "profiler/import/kineto_reader.h"

namespace us::prof {

void RankClaims::claim(int rank, const std::string& path) {
    std::lock_guard lock(m_mutex);
    const auto [it, added] = m_file_of_rank.emplace(rank, path);
    US_CHECK_INPUT(added,
                   "'{}' and '{}' both claim rank {}: give one file per rank (two recordings of one run?); '{}' was "
                   "not opened",
                   it->second, path, rank, path);
}

TraceStoreOptions rank_store_options(const TraceStoreOptions& run, size_t files) {
    TraceStoreOptions o = run;
    o.max_bytes = run.max_bytes / std::max<size_t>(1, files);
    return o;
}

RankFile read_rank_file(const std::string& path, size_t files, const TraceStoreOptions& options, RankClaims& claims,
                        std::atomic<uint64_t>* bytes_read, const std::atomic<bool>* cancel, MemoryEvents memory) {
    RankFile out;
    out.path = path;
    out.store = std::make_unique<TraceStore>(rank_store_options(options, files));
    std::string rank_from, warning;
    {  // the parsed file is freed before the rank is handed on
        ByteSource source(path);
        if (bytes_read || cancel) source.watch(bytes_read, cancel);
        const KinetoFile file = parse_kineto(source);
        out.rank = rank_of_file(file, files == 1, rank_from, warning);
        claims.claim(out.rank, path);
        if (cancel && cancel->load()) throw LoadCancelled();
        if (memory == MemoryEvents::read) out.memory = memory_events_of(file, out.rank);
        out.warnings = ingest_kineto(file, out.rank, rank_from, *out.store);
    }
    if (!warning.empty()) out.warnings.insert(out.warnings.begin(), warning);
    out.store->finalize();
    return out;
}

}  // namespace us::prof
