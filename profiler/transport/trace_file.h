// Trace files: a 16-byte file header ("USTRACE\0", format version, flags) followed by chunks (chunk.h) from any
// number of ranks. `ultrascope-train --trace FILE` on one rank writes FILE directly; on several ranks each rank
// writes FILE.rN and rank 0 merges the parts into FILE at the end (a run that dies leaves the parts, which the
// reader also accepts). A listener (`ultrascope run`, the GUI) writes one merged file as chunks arrive.
#pragma once

#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "profiler/transport/chunk.h"

namespace us::prof {

struct FileHeader {
    char magic[8];  // "USTRACE\0"
    uint32_t version;
    uint32_t flags;
};
static_assert(sizeof(FileHeader) == 16);

class TraceFileWriter {
public:
    explicit TraceFileWriter(const std::string& path);  // UserError when the file cannot be created
    ~TraceFileWriter();
    // Thread-safe. A chunk that cannot be written (full disk) ends the file at the chunk before it; error() says so.
    void append(const std::string& encoded_chunk);
    void close();
    const std::string& path() const { return m_path; }
    std::string error() const;  // empty while every chunk was written

private:
    std::string m_path;
    std::FILE* m_file = nullptr;
    uint64_t m_complete_bytes = 0;  // the header and every chunk written whole
    std::string m_error;
    mutable std::mutex m_mutex;
};

// A sink that encodes a rank's batches into a trace file.
class FileSink final : public EventSink {
public:
    FileSink(std::shared_ptr<TraceFileWriter> writer, uint32_t rank);
    void write_metadata(const std::string& json) override;
    void write_batch(const EventBatch& batch) override;
    void finish(bool clean, uint64_t dropped_total, const std::string& reason = {}) override;
    void write_flight_dump(const std::string& pickle) override;

private:
    std::shared_ptr<TraceFileWriter> m_writer;
    uint32_t m_rank;
    uint32_t m_sequence = 0;
};

struct TraceReadReport {
    std::vector<std::string> files;     // what was read
    std::vector<std::string> warnings;  // e.g. a file that ends inside a chunk (the run stopped mid-write)
    uint64_t chunks = 0;
    uint64_t bytes = 0;
};

// Reads every chunk of a trace (FILE, or the FILE.rN parts of an unfinished multi-rank trace) in file order.
// Throws UserError naming the file, the byte offset and what is wrong; a truncated last chunk is a warning.
TraceReadReport read_trace(const std::string& path, const std::function<void(Chunk&&)>& on_chunk);

// Reads the chunks of one trace held in memory (what read_trace does for each file); `name` appears in messages.
void read_trace_bytes(const std::string& bytes, const std::string& name, const std::function<void(Chunk&&)>& on_chunk,
                      TraceReadReport& report);

// The parts a multi-rank run writes.
std::string trace_part_path(const std::string& path, int rank);
// Concatenates the parts of ranks [0, world) into `path` (atomically) and removes them.
void merge_trace_parts(const std::string& path, int world);

}  // namespace us::prof
