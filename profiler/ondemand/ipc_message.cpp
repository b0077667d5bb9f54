// Kineto's daemon datagrams (ipc_message.h). The layout is the in-memory layout of dynolog's structs on x86-64 and
// aarch64 Linux (little-endian, size_t of 8 bytes), which is what Kineto sends; we copy fields out with memcpy at
// fixed offsets rather than casting, so an odd length or alignment can never reach a read.
#include "profiler/ondemand/ipc_message.h"

#include <fmt/core.h>

#include <cstring>

namespace us::prof {
namespace {

static_assert(sizeof(size_t) == 8, "Kineto's header carries a 64-bit size_t");

template <typename T>
T read_at(const char* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

template <typename T>
void append(std::string& out, T v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

std::string header(const char* type, size_t payload) {
    std::string out;
    append<uint64_t>(out, payload);
    char name[kIpcTypeBytes] = {};
    std::strncpy(name, type, kIpcTypeBytes - 1);
    out.append(name, kIpcTypeBytes);
    return out;
}

// The type field: a NUL-terminated name within 32 bytes.
bool read_type(const char* data, std::string& type, std::string& why) {
    const char* p = data + sizeof(uint64_t);
    const void* nul = std::memchr(p, '\0', kIpcTypeBytes);
    if (!nul) {
        why = "the type field has no terminating NUL";
        return false;
    }
    type.assign(p, static_cast<const char*>(nul));
    return true;
}

bool decode_poll(const char* payload, size_t size, IpcPoll& poll, std::string& why) {
    if (size < 16) {
        why = fmt::format("a poll needs at least 16 payload bytes, this one has {}", size);
        return false;
    }
    poll.config_type = read_at<int32_t>(payload);
    const int32_t n = read_at<int32_t>(payload + 4);
    poll.jobid = read_at<int64_t>(payload + 8);
    if (n < 1 || n > kIpcMaxPids) {
        why = fmt::format("a poll names {} processes (expected 1 to {})", n, kIpcMaxPids);
        return false;
    }
    if (size != 16 + 4 * size_t(n)) {
        why = fmt::format("a poll of {} processes has {} payload bytes, expected {}", n, size, 16 + 4 * size_t(n));
        return false;
    }
    poll.pids.resize(size_t(n));
    for (int32_t i = 0; i < n; ++i) {
        poll.pids[size_t(i)] = read_at<int32_t>(payload + 16 + 4 * size_t(i));
        if (poll.pids[size_t(i)] <= 0) {
            why = fmt::format("a poll names process id {} at position {}", poll.pids[size_t(i)], i);
            return false;
        }
    }
    return true;
}

}  // namespace

bool decode_ipc_message(const char* data, size_t n, IpcMessage& out, std::string& why) {
    out = {};
    if (n < kIpcHeaderBytes) {
        why = fmt::format("{} bytes, shorter than the 40-byte header", n);
        return false;
    }
    if (n > kIpcMaxDatagram) {
        why = fmt::format("{} bytes, more than any Kineto message", n);
        return false;
    }
    const uint64_t size = read_at<uint64_t>(data);
    if (size != n - kIpcHeaderBytes) {
        why = fmt::format("the header says {} payload bytes, the datagram holds {}", size, n - kIpcHeaderBytes);
        return false;
    }
    std::string type;
    if (!read_type(data, type, why)) return false;
    const char* payload = data + kIpcHeaderBytes;
    if (type == "req") {
        IpcPoll poll;
        if (!decode_poll(payload, size_t(size), poll, why)) return false;
        out.poll = std::move(poll);
        return true;
    }
    if (type == "ctxt") {
        if (size != 16) {
            why = fmt::format("a registration has 16 payload bytes, this one has {}", size);
            return false;
        }
        IpcRegister reg{read_at<int32_t>(payload), read_at<int32_t>(payload + 4), read_at<int64_t>(payload + 8)};
        if (reg.pid <= 0) {
            why = fmt::format("a registration names process id {}", reg.pid);
            return false;
        }
        out.reg = reg;
        return true;
    }
    why = type.empty() ? std::string("an empty message type") : fmt::format("unknown message type '{}'", type);
    return false;
}

std::string encode_ipc_config_reply(const std::string& config) { return header("req", config.size()) + config; }

std::string encode_ipc_register_reply(int32_t count) {
    std::string out = header("ctxt", sizeof(int32_t));
    append<int32_t>(out, count);
    return out;
}

std::string encode_ipc_poll(const IpcPoll& poll) {
    std::string out = header("req", 16 + 4 * poll.pids.size());
    append<int32_t>(out, poll.config_type);
    append<int32_t>(out, int32_t(poll.pids.size()));
    append<int64_t>(out, poll.jobid);
    for (int32_t pid : poll.pids) append<int32_t>(out, pid);
    return out;
}

std::string encode_ipc_register(const IpcRegister& reg) {
    std::string out = header("ctxt", 16);
    append<int32_t>(out, reg.gpu);
    append<int32_t>(out, reg.pid);
    append<int64_t>(out, reg.jobid);
    return out;
}

std::optional<std::string> decode_ipc_config_reply(const char* data, size_t n, std::string& why) {
    if (n < kIpcHeaderBytes) {
        why = fmt::format("{} bytes, shorter than the 40-byte header", n);
        return std::nullopt;
    }
    const uint64_t size = read_at<uint64_t>(data);
    if (size != n - kIpcHeaderBytes) {
        why = fmt::format("the header says {} payload bytes, the datagram holds {}", size, n - kIpcHeaderBytes);
        return std::nullopt;
    }
    std::string type;
    if (!read_type(data, type, why)) return std::nullopt;
    if (type != "req") {
        why = fmt::format("a reply of type '{}', expected 'req'", type);
        return std::nullopt;
    }
    return std::string(data + kIpcHeaderBytes, n - kIpcHeaderBytes);
}

}  // namespace us::prof
