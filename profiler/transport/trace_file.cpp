#include "profiler/transport/trace_file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/core/check.h"

namespace us::prof {

namespace fs = std::filesystem;

namespace {
FileHeader make_header() {
    FileHeader h{};
    std::memcpy(h.magic, "USTRACE", 8);
    h.version = kTraceFormatVersion;
    return h;
}

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    US_CHECK_INPUT(in.good(), "cannot open trace file '{}'", path);
    std::ostringstream ss;
    ss << in.rdbuf();
    return std::move(ss).str();
}

void read_one(const std::string& path, const std::function<void(Chunk&&)>& on_chunk, TraceReadReport& report) {
    const std::string bytes = read_all(path);
    report.files.push_back(path);
    read_trace_bytes(bytes, path, on_chunk, report);
}
}  // namespace

void read_trace_bytes(const std::string& bytes, const std::string& path, const std::function<void(Chunk&&)>& on_chunk,
                      TraceReadReport& report) {
    report.bytes += bytes.size();
    US_CHECK_INPUT(bytes.size() >= sizeof(FileHeader),
                   "'{}' is not an Ultrascope trace: {} bytes, shorter than the 16-byte file header", path,
                   bytes.size());
    FileHeader fh;
    std::memcpy(&fh, bytes.data(), sizeof fh);
    US_CHECK_INPUT(std::memcmp(fh.magic, "USTRACE", 8) == 0,
                   "'{}' is not an Ultrascope trace (it does not start with USTRACE)", path);
    US_CHECK_INPUT(fh.version >= kOldestTraceFormatVersion && fh.version <= kTraceFormatVersion,
                   "'{}' is a version {} trace; this build reads versions {} to {}: open it with a matching ultrascope",
                   path, fh.version, kOldestTraceFormatVersion, kTraceFormatVersion);
    size_t pos = sizeof(FileHeader);
    uint64_t index = 0;
    while (pos < bytes.size()) {
        if (bytes.size() - pos < sizeof(ChunkHeader)) {
            report.warnings.push_back(
                fmt::format("'{}' ends inside a chunk header at byte {}: the run stopped while "
                            "writing; {} complete chunks were read",
                            path, pos, index));
            return;
        }
        ChunkHeader h;
        std::memcpy(&h, bytes.data() + pos, sizeof h);
        const std::string problem = validate_header(h);
        US_CHECK_INPUT(problem.empty(), "'{}' is corrupt at byte {} (chunk {}): {}", path, pos, index, problem);
        if (bytes.size() - pos - sizeof h < h.stored_bytes) {
            report.warnings.push_back(
                fmt::format("'{}' ends inside chunk {} (byte {}): the run stopped while "
                            "writing; {} complete chunks were read",
                            path, index, pos, index));
            return;
        }
        const std::string where = fmt::format("'{}' chunk {} at byte {} (rank {})", path, index, pos, h.rank);
        on_chunk(decode_chunk(h, bytes.data() + pos + sizeof h, where));
        pos += sizeof h + h.stored_bytes;
        ++index;
        ++report.chunks;
    }
}

TraceFileWriter::TraceFileWriter(const std::string& path) : m_path(path) {
    m_file = std::fopen(path.c_str(), "wb");
    US_CHECK_INPUT(m_file, "cannot create trace file '{}': {}", path, std::strerror(errno));
    const FileHeader h = make_header();
    const bool ok = std::fwrite(&h, sizeof h, 1, m_file) == 1 && std::fflush(m_file) == 0;
    if (!ok) {
        const std::string why = std::strerror(errno);
        std::fclose(m_file);
        std::remove(path.c_str());
        fail_user("cannot write trace file '{}': {}", path, why);
    }
    m_complete_bytes = sizeof h;
}

TraceFileWriter::~TraceFileWriter() { close(); }

void TraceFileWriter::append(const std::string& chunk) {
    std::lock_guard lock(m_mutex);
    if (!m_file) return;
    // Flushed chunk by chunk: a crash keeps every chunk written so far.
    if (std::fwrite(chunk.data(), 1, chunk.size(), m_file) == chunk.size() && std::fflush(m_file) == 0) {
        m_complete_bytes += chunk.size();
        return;
    }
    // A full disk (or a quota): cut the half-written chunk off so that the file ends at its last complete chunk,
    // say so once, and write nothing more; the run itself goes on.
    const std::string why = std::strerror(errno);
    std::fclose(m_file);
    m_file = nullptr;
    std::error_code ec;
    std::filesystem::resize_file(m_path, m_complete_bytes, ec);
    m_error = fmt::format(
        "cannot write trace file '{}': {}; it stops at its last complete chunk ({} bytes) and "
        "reads up to there; free some space for the next run",
        m_path, why, m_complete_bytes);
    std::fprintf(stderr, "ultrascope: %s\n", m_error.c_str());
}

std::string TraceFileWriter::error() const {
    std::lock_guard lock(m_mutex);
    return m_error;
}

void TraceFileWriter::close() {
    std::lock_guard lock(m_mutex);
    if (m_file) std::fclose(m_file);
    m_file = nullptr;
}

FileSink::FileSink(std::shared_ptr<TraceFileWriter> writer, uint32_t rank)
    : m_writer(std::move(writer)), m_rank(rank) {}

void FileSink::write_metadata(const std::string& json) {
    m_writer->append(encode_chunk(ChunkKind::metadata, m_rank, m_sequence++, nullptr, json));
}

void FileSink::write_batch(const EventBatch& batch) {
    m_writer->append(encode_chunk(ChunkKind::events, m_rank, m_sequence++, &batch, {}));
}

void FileSink::write_flight_dump(const std::string& pickle) {
    m_writer->append(encode_chunk(ChunkKind::flight_dump, m_rank, m_sequence++, nullptr, pickle));
}

void FileSink::finish(bool clean, uint64_t dropped_total, const std::string& reason) {
    const std::string note = end_note_json(clean, dropped_total, reason);
    m_writer->append(encode_chunk(ChunkKind::end, m_rank, m_sequence++, nullptr, note));
    m_writer->close();
}

std::string trace_part_path(const std::string& path, int rank) { return fmt::format("{}.r{}", path, rank); }

TraceReadReport read_trace(const std::string& path, const std::function<void(Chunk&&)>& on_chunk) {
    TraceReadReport report;
    if (fs::exists(path)) {
        read_one(path, on_chunk, report);
        return report;
    }
    // An unfinished multi-rank trace: its parts.
    for (int rank = 0; fs::exists(trace_part_path(path, rank)); ++rank)
        read_one(trace_part_path(path, rank), on_chunk, report);
    US_CHECK_INPUT(!report.files.empty(), "trace file '{}' does not exist (nor its parts {}.r0, ...)", path, path);
    report.warnings.push_back(
        fmt::format("'{}' was not merged (the run did not finish): read {} per-rank parts", path, report.files.size()));
    return report;
}

void merge_trace_parts(const std::string& path, int world) {
    const std::string tmp = path + ".merging";
    bool ok = false;
    {
        std::ofstream out(tmp, std::ios::binary);
        US_CHECK_INPUT(out.good(), "cannot create trace file '{}': {}", path, std::strerror(errno));
        const FileHeader h = make_header();
        out.write(reinterpret_cast<const char*>(&h), sizeof h);
        for (int rank = 0; rank < world; ++rank) {
            const std::string part = read_all(trace_part_path(path, rank));
            if (part.size() > sizeof(FileHeader))
                out.write(part.data() + sizeof(FileHeader), std::streamsize(part.size() - sizeof(FileHeader)));
        }
        out.close();
        ok = !out.fail();
    }
    if (!ok) {  // a full disk: the parts stay, and read as the trace (read_trace)
        const std::string why = std::strerror(errno);
        fs::remove(tmp);
        fail_user("cannot write trace file '{}': {}; its per-rank parts {}.r0 ... are kept and read as the trace", path,
                  why, path);
    }
    fs::rename(tmp, path);
    for (int rank = 0; rank < world; ++rank) fs::remove(trace_part_path(path, rank));
}

}  // namespace us::prof
