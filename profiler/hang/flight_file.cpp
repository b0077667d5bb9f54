// Dump files read (flight_reader.h): plain or gzip, whole into a buffer kept per thread; and the cheap look at a
// file's first bytes that tells a dump from the other files a folder of them holds.
#include <algorithm>
#include <string>

#include "common/core/check.h"
#include "profiler/hang/flight_reader.h"
#include "profiler/import/byte_source.h"
#include "profiler/plain/pickle_reader.h"

namespace us::hang {
namespace {

void read_all(const std::string& path, size_t limit, std::string& bytes) {
    prof::ByteSource source(path);
    bytes.clear();
    char buffer[1 << 16];
    for (size_t n; (n = source.read(buffer, sizeof buffer)) > 0 && bytes.size() < limit;) bytes.append(buffer, n);
}

}  // namespace

FlightDump load_flight_dump(const std::string& path) {
    thread_local std::string bytes;  // kept from one dump to the next, as the arena is
    read_all(path, SIZE_MAX, bytes);
    return read_flight_dump(bytes, path);
}

bool looks_like_flight_dump(const std::string& path) {
    std::string head;
    try {
        read_all(path, 4096, head);
    } catch (const UserError&) {
        return false;
    }
    head.resize(std::min<size_t>(head.size(), 4096));
    const size_t first = head.find_first_not_of(" \t\r\n");
    const bool pickle = plain::looks_like_pickle(head);
    if (!pickle && (first == std::string::npos || head[first] != '{')) return false;
    // A dump's dict opens with its version and names its groups' config or its comm library within its first keys.
    const bool names_dump = head.find("pg_config") != std::string::npos ||
                            head.find("comm_lib_version") != std::string::npos ||
                            head.find("nccl_version") != std::string::npos;
    // A PyTorch profiler trace names "pg_config" too, in its distributedInfo; a memory snapshot has segments.
    for (const char* other : {"segments", "traceEvents", "distributedInfo", "schemaVersion", "deviceProperties"})
        if (head.find(other) != std::string::npos) return false;
    return names_dump;
}

}  // namespace us::hang
