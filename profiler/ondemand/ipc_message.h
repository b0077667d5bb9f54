// The datagrams of Kineto's daemon protocol (dynolog's "ipcfabric"), read and written byte by byte: a 40-byte header
// (size_t payload size, char type[32]) and a payload. A job started with KINETO_USE_DAEMON=1 polls with type "req"
// (int32 type, int32 n, int64 jobid, int32 pids[n]: itself, then its ancestors) and, on GPUs, registers with "ctxt"
// (int32 gpu, int32 pid, int64 jobid). Everything comes from another process: every length is checked before use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace us::prof {

inline constexpr size_t kIpcHeaderBytes = 40;  // size_t size; char type[32]
inline constexpr size_t kIpcTypeBytes = 32;
inline constexpr size_t kIpcMaxDatagram = 65536;  // a poll is 16 + 4 n bytes; anything larger is not Kineto's
inline constexpr int kIpcMaxPids = 1024;          // a process and its ancestors: deeper trees are not real

struct IpcPoll {                // type "req": "is there a trace request for me?"
    int32_t config_type = 0;    // Kineto's LibkinetoConfigType bits (activities = 2)
    int64_t jobid = 0;          // SLURM_JOB_ID, or 0
    std::vector<int32_t> pids;  // pids[0] is the sender, then its parent, ... up to init
};

struct IpcRegister {  // type "ctxt": a GPU process says it exists; it waits for an int32 answer
    int32_t gpu = 0;
    int32_t pid = 0;
    int64_t jobid = 0;
};

struct IpcMessage {
    std::optional<IpcPoll> poll;
    std::optional<IpcRegister> reg;
};

// Reads one datagram. Returns false and says why (`why`) when the bytes are not a poll or a registration; never
// reads outside [data, data + n).
bool decode_ipc_message(const char* data, size_t n, IpcMessage& out, std::string& why);

// The answer to a poll: the header (type "req") and the config text, no NUL; an empty text means "nothing".
std::string encode_ipc_config_reply(const std::string& config);
// The answer to a registration: an int32 (the number of processes registered so far, as dynolog answers).
std::string encode_ipc_register_reply(int32_t count);
// What Kineto sends, for tests and the replay of recorded datagrams.
std::string encode_ipc_poll(const IpcPoll& poll);
std::string encode_ipc_register(const IpcRegister& reg);
// The config text of a reply, or nullopt (with `why`) when the bytes are not one.
std::optional<std::string> decode_ipc_config_reply(const char* data, size_t n, std::string& why);

}  // namespace us::prof
