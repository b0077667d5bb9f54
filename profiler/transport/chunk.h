// The unit that travels: a chunk is a 32-byte header and a (zstd-compressed) payload carrying string definitions
// and event records, or a rank's metadata, or its end-of-stream note. Trace files are a file header followed by
// chunks; the live TCP stream is a handshake followed by the same chunks. docs/trace-format.md is the reference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/event.h"

namespace us::prof {

// flight_dump: the rank's Flight Recorder dump, the pickle bytes of profiler/flight/flight_writer.h (a reader keeps
// the rank's latest).
enum class ChunkKind : uint8_t { events = 1, metadata = 2, end = 3, flight_dump = 4 };

struct ChunkHeader {
    char magic[4];     // "USCK"
    uint16_t version;  // the writer's kTraceFormatVersion (decides which lanes its records may use)
    uint8_t kind;      // ChunkKind
    uint8_t codec;     // 0 stored as is, 1 zstd
    uint32_t rank;
    uint32_t sequence;      // per rank, from 0
    uint32_t raw_bytes;     // payload size before compression
    uint32_t stored_bytes;  // payload size as stored
    uint32_t crc32;         // of the header's first 24 bytes and the stored payload
    uint32_t reserved;
};
static_assert(sizeof(ChunkHeader) == 32);

inline constexpr uint32_t kMaxChunkPayload = 256u << 20;
inline constexpr uint32_t kMaxStringBytes = 4096;

// A decoded chunk.
struct Chunk {
    ChunkKind kind = ChunkKind::events;
    uint32_t rank = 0;
    uint32_t sequence = 0;
    std::vector<StringDef> strings;   // events
    std::vector<EventRecord> events;  // events
    uint64_t dropped_total = 0;       // events
    std::string text;                 // metadata (JSON), end (JSON) or flight_dump (pickle bytes)
};

uint32_t crc32(const void* data, size_t bytes, uint32_t previous = 0);
// The checksum a chunk header carries: over the header fields before it, then the stored payload.
uint32_t chunk_checksum(const ChunkHeader& h, const char* stored);

// Encodes a chunk into header + payload bytes, compressed with zstd (level 1) when that helps.
std::string encode_chunk(ChunkKind kind, uint32_t rank, uint32_t sequence, const EventBatch* batch,
                         const std::string& text);

// Checks a header read from untrusted bytes. Returns an empty string when valid, else what is wrong.
std::string validate_header(const ChunkHeader& h);

// Decodes a payload whose header was validated. Throws UserError naming `where` and what is wrong.
Chunk decode_chunk(const ChunkHeader& h, const char* stored, const std::string& where);

// The end-of-stream note a sink writes: {"clean", "dropped_events", and "reason" when one is given}.
std::string end_note_json(bool clean, uint64_t dropped_total, const std::string& reason);

}  // namespace us::prof
