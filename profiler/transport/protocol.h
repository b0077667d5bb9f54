// The live stream's wire protocol. A rank connects, sends a 64-byte Hello (magic, protocol version, rank, world
// size, the run's token); the listener answers with a 16-byte Welcome (accepted or refused, with a reason code);
// then the rank sends chunks (chunk.h) until an end chunk or the connection closes. Everything is little-endian.
// The StreamDecoder takes bytes as they arrive and never trusts a length before checking it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "profiler/transport/chunk.h"

namespace us::prof {

inline constexpr uint16_t kProtocolVersion = 1;
inline constexpr size_t kTokenBytes = 32;

struct Hello {
    char magic[4];  // "USHI"
    uint16_t version;
    uint16_t reserved;
    uint32_t rank;
    uint32_t world;
    char token[kTokenBytes];  // hex; the launcher hands it to ranks in ULTRASCOPE_TOKEN
    uint8_t pad[16];
};
static_assert(sizeof(Hello) == 64);

enum class WelcomeStatus : uint16_t { accepted = 0, bad_token = 1, bad_version = 2, bad_hello = 3 };

struct Welcome {
    char magic[4];  // "USOK"
    uint16_t version;
    uint16_t status;  // WelcomeStatus
    uint8_t pad[8];
};
static_assert(sizeof(Welcome) == 16);

Hello make_hello(uint32_t rank, uint32_t world, const std::string& token);
Welcome make_welcome(WelcomeStatus status);
// Empty when the hello is well-formed (the token is checked separately); otherwise what is wrong.
std::string validate_hello(const Hello& h);
bool tokens_equal(const char* a, const std::string& expected);  // constant time
std::string welcome_status_text(uint16_t status);
std::string random_token();  // kTokenBytes hex characters from /dev/urandom

// The listener's side of the handshake: takes a connection's first bytes as they arrive (never more than a Hello:
// an unauthenticated peer can make the listener hold 64 bytes, nothing more) and decides.
class HandshakeReader {
public:
    explicit HandshakeReader(std::string token) : m_token(std::move(token)) {}
    // Consumes what belongs to the hello from `data` and returns how many bytes that was (the rest is stream).
    size_t feed(const char* data, size_t n);
    bool complete() const { return m_filled == sizeof(Hello); }
    // Once complete: the answer to send, why it is a refusal ("" when accepted), and who the peer says it is.
    WelcomeStatus status() const { return m_status; }
    const std::string& problem() const { return m_problem; }
    uint32_t rank() const { return m_hello.rank; }

private:
    std::string m_token;
    Hello m_hello{};
    size_t m_filled = 0;
    WelcomeStatus m_status = WelcomeStatus::bad_hello;
    std::string m_problem = "incomplete hello";
};

// Reassembles chunks from a byte stream.
class StreamDecoder {
public:
    explicit StreamDecoder(std::string where) : m_where(std::move(where)) {}
    void feed(const char* data, size_t n) { m_buffer.append(data, n); }
    // The next complete chunk, if any. Throws UserError naming the byte offset in the stream on bad bytes.
    std::optional<Chunk> next();
    // Raw bytes of the last chunk next() returned (header + stored payload), for writing to a trace file.
    const std::string& last_raw() const { return m_last_raw; }
    uint64_t offset() const { return m_consumed; }
    size_t buffered() const { return m_buffer.size(); }

private:
    std::string m_where;
    std::string m_buffer;
    std::string m_last_raw;
    uint64_t m_consumed = 0;
};

}  // namespace us::prof
