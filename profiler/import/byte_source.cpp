// Plain or gzip bytes in pieces (byte_source.h), with zlib's inflate over a 256 KiB input buffer. Concatenated gzip
// members are read one after the other, as gzip itself does.
#include "profiler/import/byte_source.h"

#include <cstring>
#include <vector>
#include <zlib.h>

#include "common/core/check.h"

namespace us::prof {

struct ByteSource::Inflater {
    z_stream z{};
    std::vector<unsigned char> in = std::vector<unsigned char>(256 << 10);
    bool initialized = false;
    ~Inflater() {
        if (initialized) inflateEnd(&z);
    }
};

ByteSource::ByteSource(const std::string& path) : m_name(path) {
    m_file = std::fopen(path.c_str(), "rb");
    US_CHECK_INPUT(m_file != nullptr, "cannot open '{}': {}", path, std::strerror(errno));
    unsigned char magic[2] = {0, 0};
    const size_t n = std::fread(magic, 1, 2, m_file);
    m_gzip = n == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    std::rewind(m_file);
}

ByteSource::ByteSource(std::string bytes, std::string name) : m_name(std::move(name)), m_memory(std::move(bytes)) {
    m_gzip = m_memory.size() >= 2 && uint8_t(m_memory[0]) == 0x1f && uint8_t(m_memory[1]) == 0x8b;
}

ByteSource::~ByteSource() {
    if (m_file) std::fclose(m_file);
}

size_t ByteSource::read_raw(char* out, size_t capacity) {
    if (m_cancel && m_cancel->load(std::memory_order_relaxed)) throw LoadCancelled();
    size_t n = 0;
    if (m_file) {
        n = std::fread(out, 1, capacity, m_file);
        US_CHECK_INPUT(n > 0 || !std::ferror(m_file), "reading '{}' failed after {} bytes: {}", m_name, m_in,
                       std::strerror(errno));
    } else {
        n = std::min(capacity, m_memory.size() - m_memory_pos);
        std::memcpy(out, m_memory.data() + m_memory_pos, n);
        m_memory_pos += n;
    }
    m_in += n;
    if (m_progress) m_progress->fetch_add(n, std::memory_order_relaxed);
    return n;
}

size_t ByteSource::read(char* out, size_t capacity) {
    const size_t n = m_gzip ? read_gzip(out, capacity) : read_raw(out, capacity);
    m_out += n;
    return n;
}

size_t ByteSource::read_gzip(char* out, size_t capacity) {
    if (m_gzip_done) return 0;
    if (!m_inflater) {
        m_inflater = std::make_unique<Inflater>();
        // 16 + MAX_WBITS: a gzip header and trailer around the deflate stream.
        US_CHECK_INPUT(inflateInit2(&m_inflater->z, 16 + MAX_WBITS) == Z_OK, "'{}': zlib could not start", m_name);
        m_inflater->initialized = true;
    }
    z_stream& z = m_inflater->z;
    z.next_out = reinterpret_cast<Bytef*>(out);
    z.avail_out = uInt(std::min<size_t>(capacity, 1u << 30));
    while (z.avail_out > 0) {
        if (z.avail_in == 0) {
            const size_t n = read_raw(reinterpret_cast<char*>(m_inflater->in.data()), m_inflater->in.size());
            if (n == 0)
                fail_user(
                    "'{}' is a gzip file cut short: it ended after {} compressed bytes ({} bytes of JSON "
                    "read); copy the trace again or re-record it",
                    m_name, m_in, m_out + (capacity - z.avail_out));
            z.next_in = m_inflater->in.data();
            z.avail_in = uInt(n);
        }
        const int rc = inflate(&z, Z_NO_FLUSH);
        if (rc == Z_STREAM_END) {
            // Another gzip member may follow (files concatenated with cat); anything else ends the stream.
            if (z.avail_in == 0) {
                const size_t n = read_raw(reinterpret_cast<char*>(m_inflater->in.data()), m_inflater->in.size());
                z.next_in = m_inflater->in.data();
                z.avail_in = uInt(n);
            }
            if (z.avail_in >= 2 && z.next_in[0] == 0x1f && z.next_in[1] == 0x8b) {
                inflateReset(&z);
                continue;
            }
            m_gzip_done = true;
            break;
        }
        if (rc != Z_OK && rc != Z_BUF_ERROR)
            fail_user("'{}' is not a valid gzip file: {} (after {} compressed bytes, {} bytes of JSON read)", m_name,
                      z.msg ? z.msg : "damaged data", m_in, m_out + (capacity - z.avail_out));
    }
    return capacity - z.avail_out;
}

}  // namespace us::prof
