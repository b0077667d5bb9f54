// The bytes of a file, plain or gzip-compressed, read front to back in pieces: the Kineto reader never holds a whole
// trace in memory. A gzip stream that ends early (a copy cut short, a crashed writer) is refused with the file's
// name and how many bytes it gave before it ended.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <exception>
#include <string>

namespace us::prof {

// Thrown by a watched read once the load it belongs to was cancelled: not an input error.
struct LoadCancelled : std::exception {
    const char* what() const noexcept override { return "the load was cancelled"; }
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
    std::atomic<uint64_t>* m_progress = nullptr;
    const std::atomic<bool>* m_cancel = nullptr;
};

}  // namespace us::prof
