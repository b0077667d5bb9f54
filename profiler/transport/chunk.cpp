#include "profiler/transport/chunk.h"

#include <nlohmann/json.hpp>

#include <fmt/format.h>
#include <zstd.h>

#include <array>
#include <cstddef>
#include <cstring>

#include "common/core/check.h"

namespace us::prof {

namespace {

const std::array<uint32_t, 256>& crc_table() {
    static const std::array<uint32_t, 256> table = [] {
        std::array<uint32_t, 256> t{};
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
            t[i] = c;
        }
        return t;
    }();
    return table;
}

template <typename T>
void put(std::string& out, const T& v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// Reads from an untrusted payload, never past its end.
class PayloadReader {
public:
    PayloadReader(const std::string& bytes, const std::string& where) : m_bytes(bytes), m_where(where) {}
    template <typename T>
    T get(const char* what) {
        US_CHECK_INPUT(m_pos + sizeof(T) <= m_bytes.size(), "{}: payload ends inside {}", m_where, what);
        T v;
        std::memcpy(&v, m_bytes.data() + m_pos, sizeof(T));
        m_pos += sizeof(T);
        return v;
    }
    std::string bytes(size_t n, const char* what) {
        US_CHECK_INPUT(n <= m_bytes.size() - m_pos, "{}: payload ends inside {}", m_where, what);
        std::string s = m_bytes.substr(m_pos, n);
        m_pos += n;
        return s;
    }
    size_t remaining() const { return m_bytes.size() - m_pos; }

private:
    const std::string& m_bytes;
    const std::string& m_where;
    size_t m_pos = 0;
};

// A record from the wire must name a known type and lane before anything indexes with its fields. The lanes a
// chunk may use depend on its format version.
std::string validate_record(const EventRecord& e, uint32_t version) {
    switch (EventType(e.type)) {
        case EventType::span:
            if (e.span.lane >= lane_count_of_version(version))
                return fmt::format("span with unknown lane {} (format version {})", e.span.lane, version);
            if (e.span.kind >= uint8_t(SpanKind::count)) return fmt::format("span with unknown kind {}", e.span.kind);
            if (e.span.op >= uint8_t(OpClass::count)) return fmt::format("span with unknown op {}", e.span.op);
            if (e.span.phase >= uint8_t(Phase::count)) return fmt::format("span with unknown phase {}", e.span.phase);
            if (e.span.end_ns < e.span.begin_ns) return "span that ends before it begins";
            return {};
        case EventType::memory:
            if (e.memory.category >= 8) return fmt::format("memory event with unknown category {}", e.memory.category);
            if (e.memory.phase >= uint8_t(Phase::count)) return "memory event with unknown phase";
            return {};
        case EventType::counter:
            return {};
        default:
            return fmt::format("record of unknown type {}", e.type);
    }
}

}  // namespace

uint32_t crc32(const void* data, size_t bytes, uint32_t previous) {
    const auto& t = crc_table();
    const auto* p = static_cast<const uint8_t*>(data);
    uint32_t c = previous ^ 0xffffffffu;
    for (size_t i = 0; i < bytes; ++i) c = t[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

uint32_t chunk_checksum(const ChunkHeader& h, const char* stored) {
    return crc32(stored, h.stored_bytes, crc32(&h, offsetof(ChunkHeader, crc32)));
}

std::string encode_chunk(ChunkKind kind, uint32_t rank, uint32_t sequence, const EventBatch* batch,
                         const std::string& text) {
    std::string raw;
    if (kind == ChunkKind::events) {
        put(raw, uint32_t(batch->strings.size()));
        for (const auto& s : batch->strings) {
            const uint32_t len = uint32_t(std::min<size_t>(s.text.size(), kMaxStringBytes));
            put(raw, s.id);
            put(raw, len);
            raw.append(s.text.data(), len);
        }
        put(raw, uint32_t(batch->events.size()));
        put(raw, batch->dropped_total);
        raw.append(reinterpret_cast<const char*>(batch->events.data()), batch->events.size() * sizeof(EventRecord));
    } else {
        raw = text;
    }
    US_ASSERT(raw.size() <= kMaxChunkPayload, "chunk payload of {} bytes", raw.size());
    std::string stored(ZSTD_compressBound(raw.size()), '\0');
    const size_t n = ZSTD_compress(stored.data(), stored.size(), raw.data(), raw.size(), 1);
    uint8_t codec = 1;
    if (ZSTD_isError(n) || n >= raw.size()) {
        stored = raw;
        codec = 0;
    } else {
        stored.resize(n);
    }
    ChunkHeader h{};
    std::memcpy(h.magic, "USCK", 4);
    h.version = uint16_t(kTraceFormatVersion);
    h.kind = uint8_t(kind);
    h.codec = codec;
    h.rank = rank;
    h.sequence = sequence;
    h.raw_bytes = uint32_t(raw.size());
    h.stored_bytes = uint32_t(stored.size());
    h.crc32 = chunk_checksum(h, stored.data());
    std::string out(reinterpret_cast<const char*>(&h), sizeof h);
    out += stored;
    return out;
}

std::string validate_header(const ChunkHeader& h) {
    if (std::memcmp(h.magic, "USCK", 4) != 0) return "not a chunk (bad magic)";
    if (h.version < kOldestTraceFormatVersion || h.version > kTraceFormatVersion)
        return fmt::format("chunk format version {}, this build reads versions {} to {}", h.version,
                           kOldestTraceFormatVersion, kTraceFormatVersion);
    if (h.kind < 1 || h.kind > 4) return fmt::format("unknown chunk kind {}", h.kind);
    if (h.codec > 1) return fmt::format("unknown codec {}", h.codec);
    if (h.raw_bytes > kMaxChunkPayload || h.stored_bytes > kMaxChunkPayload)
        return fmt::format("chunk claims {} bytes, more than the {} allowed", std::max(h.raw_bytes, h.stored_bytes),
                           kMaxChunkPayload);
    if (h.codec == 0 && h.raw_bytes != h.stored_bytes) return "uncompressed chunk with differing sizes";
    if (h.rank > 1000000) return fmt::format("implausible rank {}", h.rank);
    return {};
}

Chunk decode_chunk(const ChunkHeader& h, const char* stored, const std::string& where) {
    US_CHECK_INPUT(chunk_checksum(h, stored) == h.crc32, "{}: checksum mismatch (the data is corrupt)", where);
    std::string raw;
    if (h.codec == 1) {
        raw.resize(h.raw_bytes);
        const size_t n = ZSTD_decompress(raw.data(), raw.size(), stored, h.stored_bytes);
        US_CHECK_INPUT(!ZSTD_isError(n) && n == h.raw_bytes, "{}: compressed payload does not decode to {} bytes",
                       where, h.raw_bytes);
    } else {
        raw.assign(stored, h.stored_bytes);
    }
    Chunk c;
    c.kind = ChunkKind(h.kind);
    c.rank = h.rank;
    c.sequence = h.sequence;
    if (c.kind != ChunkKind::events) {
        c.text = std::move(raw);
        return c;
    }
    PayloadReader r(raw, where);
    const uint32_t nstrings = r.get<uint32_t>("the string count");
    US_CHECK_INPUT(nstrings <= r.remaining() / 8, "{}: {} strings cannot fit the payload", where, nstrings);
    c.strings.reserve(nstrings);
    for (uint32_t i = 0; i < nstrings; ++i) {
        const uint32_t id = r.get<uint32_t>("a string id");
        const uint32_t len = r.get<uint32_t>("a string length");
        US_CHECK_INPUT(len <= kMaxStringBytes, "{}: string {} is {} bytes long (at most {})", where, id, len,
                       kMaxStringBytes);
        US_CHECK_INPUT(id < (1u << 24), "{}: string id {} out of range", where, id);
        c.strings.push_back({id, r.bytes(len, "a string")});
    }
    const uint32_t nevents = r.get<uint32_t>("the event count");
    c.dropped_total = r.get<uint64_t>("the dropped count");
    US_CHECK_INPUT(uint64_t(nevents) * sizeof(EventRecord) == r.remaining(),
                   "{}: {} events need {} bytes but {} remain", where, nevents, uint64_t(nevents) * sizeof(EventRecord),
                   r.remaining());
    c.events.resize(nevents);
    if (nevents) std::memcpy(c.events.data(), raw.data() + (raw.size() - r.remaining()), r.remaining());
    for (uint32_t i = 0; i < nevents; ++i) {
        const std::string problem = validate_record(c.events[i], h.version);
        US_CHECK_INPUT(problem.empty(), "{}: event {}: {}", where, i, problem);
    }
    return c;
}

std::string end_note_json(bool clean, uint64_t dropped_total, const std::string& reason) {
    nlohmann::json note = {{"clean", clean}, {"dropped_events", dropped_total}};
    if (!reason.empty()) note["reason"] = reason;
    return note.dump();
}

}  // namespace us::prof
