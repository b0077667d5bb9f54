// Plain or gzip bytes in pieces (byte_source.h), with zlib's inflate over a 256 KiB input buffer, or whole, with
// libdeflate. Concatenated gzip members are read one after the other, as gzip itself does.
#include "profiler/import/byte_source.h"

#include <libdeflate.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
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

void WholeBuffer::ensure(size_t bytes, size_t keep) {
    if (bytes <= m_capacity) return;
    // A document of megabytes is written once and walked once: on 4 KiB pages faulting it in costs as much as
    // inflating it, so large buffers ask for 2 MiB pages (where the kernel's transparent huge pages allow it).
    constexpr size_t kHuge = size_t(2) << 20;
    char* grown = nullptr;
    bool mapped = false;
    if (bytes >= kHuge) {
        const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
        void* p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
            madvise(p, rounded, MADV_HUGEPAGE);  // a hint: without it the pages are small, nothing else changes
            grown = static_cast<char*>(p), mapped = true, bytes = rounded;
        }
    }
    if (!grown) grown = new char[bytes];  // not value-initialised: no pass over it before it is written
    if (keep > 0) std::memcpy(grown, m_bytes, std::min(keep, m_capacity));
    release();
    m_bytes = grown, m_capacity = bytes, m_mapped = mapped;
}

void WholeBuffer::release() {
    if (m_mapped)
        munmap(m_bytes, m_capacity);
    else
        delete[] m_bytes;
    m_bytes = nullptr, m_capacity = 0, m_mapped = false;
}

namespace {

struct Decompressor {
    libdeflate_decompressor* d = libdeflate_alloc_decompressor();
    ~Decompressor() { libdeflate_free_decompressor(d); }
};

// Inflates the gzip members in `in` into `out` (grown as needed, up to `max_bytes` of content and `padding` bytes
// after it); the content's size, or nothing when it does not fit or the data is damaged or cut short. The last
// member's trailer gives its size (modulo 4 GiB): the first guess for the buffer.
std::optional<size_t> inflate_whole(const unsigned char* in, size_t in_size, WholeBuffer& out, size_t max_bytes,
                                    size_t padding) {
    Decompressor z;
    if (!z.d) return std::nullopt;
    size_t room = in_size >= 4 ? size_t(in[in_size - 4]) | size_t(in[in_size - 3]) << 8 |
                                     size_t(in[in_size - 2]) << 16 | size_t(in[in_size - 1]) << 24
                               : 0;
    room = std::min(std::max(room, in_size * 2), max_bytes);
    out.ensure(room + padding);
    size_t in_pos = 0, out_pos = 0;
    for (;;) {
        size_t used_in = 0, used_out = 0;
        const libdeflate_result r = libdeflate_gzip_decompress_ex(
            z.d, in + in_pos, in_size - in_pos, out.data() + out_pos, room - out_pos, &used_in, &used_out);
        if (r == LIBDEFLATE_INSUFFICIENT_SPACE) {
            if (room >= max_bytes) return std::nullopt;
            room = std::min(room * 2, max_bytes);
            out.ensure(room + padding, out_pos);
            continue;
        }
        if (r != LIBDEFLATE_SUCCESS) return std::nullopt;
        in_pos += used_in;
        out_pos += used_out;
        // Another gzip member may follow (files concatenated with cat); anything else ends the stream.
        if (in_size - in_pos >= 2 && in[in_pos] == 0x1f && in[in_pos + 1] == 0x8b) continue;
        break;
    }
    std::memset(out.data() + out_pos, 0, padding);
    return out_pos;
}

}  // namespace

std::optional<size_t> ByteSource::read_whole(WholeBuffer& buffer, size_t max_bytes, size_t padding) {
    if (m_in != 0 || m_out != 0) return std::nullopt;
    check_cancel();
    std::unique_ptr<unsigned char[]> compressed;  // a gzip file's bytes
    const unsigned char* raw = reinterpret_cast<const unsigned char*>(m_memory.data());
    size_t in_size = m_memory.size();
    if (m_file) {
        struct stat st {};
        if (fstat(fileno(m_file), &st) != 0 || !S_ISREG(st.st_mode) || uint64_t(st.st_size) > max_bytes)
            return std::nullopt;
        in_size = size_t(st.st_size);
        unsigned char* target = nullptr;
        if (m_gzip) {
            compressed.reset(new unsigned char[std::max<size_t>(in_size, 1)]);
            target = compressed.get();
        } else {
            buffer.ensure(in_size + padding);
            target = reinterpret_cast<unsigned char*>(buffer.data());
        }
        const size_t n = std::fread(target, 1, in_size, m_file);
        if (n != in_size || std::fgetc(m_file) != EOF) {  // changed while read: read it in pieces
            std::rewind(m_file);
            return std::nullopt;
        }
        raw = target;
    } else if (in_size > max_bytes) {
        return std::nullopt;
    }
    std::optional<size_t> content;
    if (m_gzip) {
        content = inflate_whole(raw, in_size, buffer, max_bytes, padding);
        if (!content) {
            if (m_file) std::rewind(m_file);
            return std::nullopt;
        }
    } else {
        if (!m_file) {
            buffer.ensure(in_size + padding);
            std::memcpy(buffer.data(), m_memory.data(), in_size);
        }
        std::memset(buffer.data() + in_size, 0, padding);
        content = in_size;
    }
    m_in = in_size;
    m_out = *content;
    m_gzip_done = true;
    m_memory_pos = m_memory.size();
    if (m_file) std::fseek(m_file, 0, SEEK_END);
    return content;  // the progress line hears of the bytes as they are walked: walked()
}

void ByteSource::walked(double fraction) {
    check_cancel();
    const uint64_t now = std::min(m_in, uint64_t(double(m_in) * std::clamp(fraction, 0.0, 1.0)));
    if (m_progress && now > m_reported) m_progress->fetch_add(now - m_reported, std::memory_order_relaxed);
    m_reported = std::max(m_reported, now);
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
    if (m_gzip_done) return 0;  // read whole
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
