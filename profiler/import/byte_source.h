// The bytes of a file, plain or gzip-compressed, read front to back in pieces, so that no trace has to fit in
// memory; or, for a file up to a size the caller chooses, read whole into one buffer (libdeflate inflates it several
// times faster than zlib's streaming inflate) for the SIMD parser (kineto_document.h). A gzip stream that ends early
// (a copy cut short, a crashed writer) is refused with the file's name and how many bytes it gave before it ended.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <exception>
#include <string>

namespace us::prof {

// Thrown by a watched read once the load it belongs to was cancelled: not an input error.
struct LoadCancelled : std::exception {
    const char* what() const noexcept override { return "the load was cancelled"; }
};

// A document read whole (ByteSource::read_whole): grown without zero-filling what is about to be overwritten, and
// kept by its owner from one file to the next.
class WholeBuffer {
public:
    WholeBuffer() = default;
    ~WholeBuffer() { release(); }
    WholeBuffer(const WholeBuffer&) = delete;
    WholeBuffer& operator=(const WholeBuffer&) = delete;

    char* data() { return m_bytes; }
    const char* data() const { return m_bytes; }
    size_t capacity() const { return m_capacity; }
    // At least `bytes` of room, the first `keep` bytes kept.
    void ensure(size_t bytes, size_t keep = 0);
    void release();

private:
    char* m_bytes = nullptr;
    size_t m_capacity = 0;
    bool m_mapped = false;  // large buffers are mapped, with transparent huge pages asked for
};

class ByteSource {
public:
    // Opens `path` (gzip when it starts with the gzip magic bytes, whatever its name). Throws UserError when it
    // cannot be opened.
    explicit ByteSource(const std::string& path);
    // The same over bytes in memory (tests, the fuzzer); `name` stands for the file in messages.
    ByteSource(std::string bytes, std::string name);
    ~ByteSource();
    ByteSource(const ByteSource&) = delete;
    ByteSource& operator=(const ByteSource&) = delete;

    // Fills up to `capacity` bytes; returns how many (0 only at the end). Throws UserError on a damaged or cut
    // gzip stream.
    size_t read(char* out, size_t capacity);
    // Adds the file bytes consumed to `*file_bytes` as they are read (a progress line on another thread), and
    // throws LoadCancelled at the next read of the file once `*cancel` is set. Either may be null.
    void watch(std::atomic<uint64_t>* file_bytes, const std::atomic<bool>* cancel) {
        m_progress = file_bytes;
        m_cancel = cancel;
    }
    // Before the first read: the whole uncompressed content at the front of `buffer`, followed by `padding` zero
    // bytes, when it is at most `max_bytes`; returns the content's size. Nothing, with nothing consumed, when it is
    // larger, or when it is gzip that libdeflate cannot inflate (damaged, cut short): read() then gives the bytes,
    // or the message. After it, read() returns 0.
    std::optional<size_t> read_whole(WholeBuffer& buffer, size_t max_bytes, size_t padding);
    // Throws LoadCancelled once the load this source belongs to was cancelled (for work between reads).
    void check_cancel() const {
        if (m_cancel && m_cancel->load(std::memory_order_relaxed)) throw LoadCancelled();
    }
    // After read_whole: `fraction` of the content has been walked. The progress line counts the file's bytes as
    // the walk goes (the reading itself takes a small part of the time), and a cancel is seen here.
    void walked(double fraction);
    const std::atomic<bool>* cancel_flag() const { return m_cancel; }
    const std::string& name() const { return m_name; }
    bool compressed() const { return m_gzip; }
    uint64_t bytes_out() const { return m_out; }  // uncompressed bytes handed out so far
    uint64_t bytes_in() const { return m_in; }    // file bytes consumed so far

private:
    size_t read_raw(char* out, size_t capacity);
    size_t read_gzip(char* out, size_t capacity);

    std::string m_name;
    std::FILE* m_file = nullptr;
    std::string m_memory;  // the bytes, when reading from memory
    size_t m_memory_pos = 0;
    bool m_gzip = false;
    bool m_gzip_done = false;
    struct Inflater;
    std::unique_ptr<Inflater> m_inflater;
    uint64_t m_out = 0, m_in = 0;
    uint64_t m_reported = 0;  // file bytes a walk of a whole read has reported to the progress line
    std::atomic<uint64_t>* m_progress = nullptr;
    const std::atomic<bool>* m_cancel = nullptr;
};

}  // namespace us::prof
