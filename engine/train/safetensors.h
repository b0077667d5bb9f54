// safetensors files (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length, a JSON
// header naming each tensor's dtype, shape and byte range, then the raw little-endian data. The reader checks
// every field against the file before trusting it; the writer writes a temporary file and renames it, so a
// checkpoint on disk is always whole.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace us {

struct SafeTensor {
    std::string name;
    std::string dtype;  // "F32", "BF16", "I32", ...
    std::vector<int64_t> shape;
    const uint8_t* data = nullptr;
    size_t bytes = 0;
    int64_t numel() const;
};

class SafetensorsFile {
public:
    // UserError naming the file and what is wrong: missing, truncated, bad header, offsets out of range.
    static SafetensorsFile read(const std::string& path);
    static SafetensorsFile parse(std::string bytes, const std::string& name);

    const SafeTensor* find(const std::string& name) const;
    const std::vector<SafeTensor>& tensors() const { return m_tensors; }
    const std::map<std::string, std::string>& metadata() const { return m_metadata; }
    std::string metadata_or(const std::string& key, const std::string& fallback) const;

private:
    std::string m_bytes;
    std::vector<SafeTensor> m_tensors;
    std::map<std::string, std::string> m_metadata;
};

class SafetensorsWriter {
public:
    // The data must stay alive until write_atomically returns.
    void add(const std::string& name, const std::string& dtype, std::vector<int64_t> shape, const void* data,
             size_t bytes);
    void set_metadata(const std::string& key, const std::string& value) { m_metadata[key] = value; }
    // Writes PATH.tmp-<pid>, flushes it to disk, renames it over PATH. UserError when the path is not writable.
    void write_atomically(const std::string& path) const;  // whether it can: common/core/writable_file.h

private:
    struct Entry {
        std::string name, dtype;
        std::vector<int64_t> shape;
        const void* data;
        size_t bytes;
    };
    std::vector<Entry> m_entries;
    std::map<std::string, std::string> m_metadata;
};

}  // namespace us
