#include "engine/train/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/core/check.h"

namespace us {

namespace {

size_t dtype_bytes(const std::string& dtype) {
    if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
    if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
    if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
    if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
    return 0;
}

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

}  // namespace

int64_t SafeTensor::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

SafetensorsFile SafetensorsFile::read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    US_CHECK_INPUT(in.good(), "cannot open checkpoint '{}': check the path", path);
    std::ostringstream ss;
    ss << in.rdbuf();
    return parse(std::move(ss).str(), path);
}

SafetensorsFile SafetensorsFile::parse(std::string bytes, const std::string& name) {
    SafetensorsFile f;
    f.m_bytes = std::move(bytes);
    const std::string& b = f.m_bytes;
    US_CHECK_INPUT(b.size() >= 8, "'{}' is not a safetensors file: {} bytes, shorter than the 8-byte header length",
                   name, b.size());
    uint64_t header_len = 0;
    std::memcpy(&header_len, b.data(), 8);  // little-endian on every platform we build for
    US_CHECK_INPUT(header_len <= kMaxHeaderBytes && header_len <= b.size() - 8,
                   "'{}' is truncated or corrupt: its header claims {} bytes but the file has {} after the length",
                   name, header_len, b.size() - 8);
    nlohmann::json header;
    try {
        header = nlohmann::json::parse(b.begin() + 8, b.begin() + 8 + std::ptrdiff_t(header_len));
    } catch (const nlohmann::json::exception& e) {
        fail_user("'{}' has a corrupt safetensors header: {}", name, e.what());
    }
    US_CHECK_INPUT(header.is_object(), "'{}' has a corrupt safetensors header: not a JSON object", name);
    const size_t data_begin = 8 + size_t(header_len);
    const size_t data_size = b.size() - data_begin;
    for (auto it = header.begin(); it != header.end(); ++it) {
        if (it.key() == "__metadata__") {
            US_CHECK_INPUT(it->is_object(), "'{}': __metadata__ is not an object", name);
            for (auto m = it->begin(); m != it->end(); ++m) {
                US_CHECK_INPUT(m->is_string(), "'{}': metadata '{}' is not a string", name, m.key());
                f.m_metadata[m.key()] = m->get<std::string>();
            }
            continue;
        }
        const nlohmann::json& e = *it;
        US_CHECK_INPUT(e.is_object() && e.contains("dtype") && e.contains("shape") && e.contains("data_offsets"),
                       "'{}': tensor '{}' lacks dtype, shape or data_offsets", name, it.key());
        US_CHECK_INPUT(e["dtype"].is_string() && e["shape"].is_array() && e["data_offsets"].is_array() &&
                           e["data_offsets"].size() == 2,
                       "'{}': tensor '{}' has malformed fields", name, it.key());
        SafeTensor t;
        t.name = it.key();
        t.dtype = e["dtype"].get<std::string>();
        const size_t elem = dtype_bytes(t.dtype);
        US_CHECK_INPUT(elem > 0, "'{}': tensor '{}' has unknown dtype '{}'", name, t.name, t.dtype);
        for (const auto& d : e["shape"]) {
            US_CHECK_INPUT(d.is_number_integer() && d.get<int64_t>() >= 0 && d.get<int64_t>() < (int64_t(1) << 40),
                           "'{}': tensor '{}' has an invalid shape", name, t.name);
            t.shape.push_back(d.get<int64_t>());
        }
        const auto& off = e["data_offsets"];
        US_CHECK_INPUT(off[0].is_number_unsigned() && off[1].is_number_unsigned(),
                       "'{}': tensor '{}' has invalid data_offsets", name, t.name);
        const uint64_t lo = off[0].get<uint64_t>(), hi = off[1].get<uint64_t>();
        US_CHECK_INPUT(lo <= hi && hi <= data_size,
                       "'{}' is truncated or corrupt: tensor '{}' spans bytes [{}, {}) of a {}-byte data section", name,
                       t.name, lo, hi, data_size);
        US_CHECK_INPUT(hi - lo == uint64_t(t.numel()) * elem,
                       "'{}': tensor '{}' has {} bytes but its shape and dtype need {}", name, t.name, hi - lo,
                       uint64_t(t.numel()) * elem);
        t.data = reinterpret_cast<const uint8_t*>(b.data()) + data_begin + lo;
        t.bytes = size_t(hi - lo);
        f.m_tensors.push_back(std::move(t));
    }
    return f;
}

const SafeTensor* SafetensorsFile::find(const std::string& name) const {
    for (const auto& t : m_tensors)
        if (t.name == name) return &t;
    return nullptr;
}

std::string SafetensorsFile::metadata_or(const std::string& key, const std::string& fallback) const {
    auto it = m_metadata.find(key);
    return it == m_metadata.end() ? fallback : it->second;
}

void SafetensorsWriter::add(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
                            const void* data, size_t bytes) {
    m_entries.push_back({name, dtype, std::move(shape), data, bytes});
}

void SafetensorsWriter::write_atomically(const std::string& path) const {
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!m_metadata.empty()) header["__metadata__"] = m_metadata;
    uint64_t offset = 0;
    for (const auto& e : m_entries) {
        header[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {offset, offset + e.bytes}}};
        offset += e.bytes;
    }
    std::string text = header.dump();
    while ((text.size() + 8) % 8 != 0) text.push_back(' ');  // keeps the data 8-byte aligned
    const std::string tmp = fmt::format("{}.tmp-{}", path, getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    US_CHECK_INPUT(fd >= 0, "cannot write checkpoint '{}': {}", path, std::strerror(errno));
    auto write_all = [&](const void* p, size_t n) {
        const char* c = static_cast<const char*>(p);
        while (n > 0) {
            const ssize_t w = ::write(fd, c, n);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                const std::string why = std::strerror(errno);
                ::close(fd);
                ::unlink(tmp.c_str());
                fail_user("cannot write checkpoint '{}': {}", path, why);
            }
            c += w;
            n -= size_t(w);
        }
    };
    const uint64_t len = text.size();
    write_all(&len, 8);
    write_all(text.data(), text.size());
    for (const auto& e : m_entries) write_all(e.data, e.bytes);
    const bool synced = ::fsync(fd) == 0;
    ::close(fd);
    if (!synced || std::rename(tmp.c_str(), path.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        ::unlink(tmp.c_str());
        fail_user("cannot write checkpoint '{}': {}", path, why);
    }
}

}  // namespace us
