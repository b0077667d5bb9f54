#include "profiler/transport/protocol.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "common/core/check.h"

namespace us::prof {

Hello make_hello(uint32_t rank, uint32_t world, const std::string& token) {
    Hello h{};
    std::memcpy(h.magic, "USHI", 4);
    h.version = kProtocolVersion;
    h.rank = rank;
    h.world = world;
    std::memcpy(h.token, token.data(), std::min(token.size(), kTokenBytes));
    return h;
}

Welcome make_welcome(WelcomeStatus status) {
    Welcome w{};
    std::memcpy(w.magic, "USOK", 4);
    w.version = kProtocolVersion;
    w.status = uint16_t(status);
    return w;
}

std::string validate_hello(const Hello& h) {
    if (std::memcmp(h.magic, "USHI", 4) != 0) return "not an Ultrascope rank (bad hello magic)";
    if (h.version != kProtocolVersion)
        return fmt::format("protocol version {}, this listener speaks version {}", h.version, kProtocolVersion);
    if (h.world == 0 || h.world > 1000000 || h.rank >= h.world)
        return fmt::format("implausible rank {} of world {}", h.rank, h.world);
    return {};
}

bool tokens_equal(const char* a, const std::string& expected) {
    if (expected.size() != kTokenBytes) return false;
    unsigned diff = 0;
    for (size_t i = 0; i < kTokenBytes; ++i) diff |= unsigned(uint8_t(a[i]) ^ uint8_t(expected[i]));
    return diff == 0;
}

size_t HandshakeReader::feed(const char* data, size_t n) {
    if (complete()) return 0;
    const size_t take = std::min(n, sizeof(Hello) - m_filled);
    std::memcpy(reinterpret_cast<char*>(&m_hello) + m_filled, data, take);
    m_filled += take;
    if (!complete()) return take;
    m_problem = validate_hello(m_hello);
    if (!m_problem.empty())
        m_status = std::memcmp(m_hello.magic, "USHI", 4) == 0 && m_hello.version != kProtocolVersion
                       ? WelcomeStatus::bad_version
                       : WelcomeStatus::bad_hello;
    else if (!tokens_equal(m_hello.token, m_token)) {
        m_status = WelcomeStatus::bad_token;
        m_problem = welcome_status_text(uint16_t(m_status));
    } else {
        m_status = WelcomeStatus::accepted;
    }
    return take;
}

std::string welcome_status_text(uint16_t status) {
    switch (WelcomeStatus(status)) {
        case WelcomeStatus::accepted:
            return "accepted";
        case WelcomeStatus::bad_token:
            return "refused: wrong or missing run token (ULTRASCOPE_TOKEN)";
        case WelcomeStatus::bad_version:
            return "refused: protocol version mismatch";
        case WelcomeStatus::bad_hello:
            return "refused: malformed hello";
    }
    return fmt::format("refused (status {})", status);
}

std::string random_token() {
    std::ifstream urandom("/dev/urandom", std::ios::binary);
    unsigned char bytes[kTokenBytes / 2];
    urandom.read(reinterpret_cast<char*>(bytes), sizeof bytes);
    US_ASSERT(urandom.good(), "cannot read /dev/urandom");
    std::string hex;
    for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
    return hex;
}

std::optional<Chunk> StreamDecoder::next() {
    if (m_buffer.size() < sizeof(ChunkHeader)) return std::nullopt;
    ChunkHeader h;
    std::memcpy(&h, m_buffer.data(), sizeof h);
    const std::string problem = validate_header(h);
    US_CHECK_INPUT(problem.empty(), "{}: bad bytes at stream offset {}: {}", m_where, m_consumed, problem);
    const size_t total = sizeof h + h.stored_bytes;
    if (m_buffer.size() < total) return std::nullopt;
    const std::string where = fmt::format("{} at stream offset {} (rank {})", m_where, m_consumed, h.rank);
    Chunk c = decode_chunk(h, m_buffer.data() + sizeof h, where);
    m_last_raw.assign(m_buffer.data(), total);
    m_buffer.erase(0, total);
    m_consumed += total;
    return c;
}

}  // namespace us::prof
