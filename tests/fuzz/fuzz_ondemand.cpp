// libFuzzer target: arbitrary bytes as datagrams on the node's "dynolog" socket, read as the daemon reads them.
// The whole input is one datagram (the seeds are real polls and registrations); then it is read again as a
// sequence of datagrams, each preceded by a 2-byte length, and every poll that decodes goes to the registry, so
// launcher detection and job grouping see any tree of pids a sender can claim.
#include <algorithm>
#include <cstdint>
#include <string>

#include "profiler/ondemand/ipc_message.h"
#include "profiler/ondemand/poller_registry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace us::prof;
    const char* bytes = reinterpret_cast<const char*>(data);
    IpcMessage m;
    std::string why;
    (void)decode_ipc_message(bytes, size, m, why);
    (void)decode_ipc_config_reply(bytes, size, why);
    PollerRegistry registry(
        [](int pid) {
            ProcessInfo info;
            info.rank = pid % 3 - 1;  // some ranks, some lone processes
            info.world_size = pid % 5;
            info.local_world_size = pid % 4;
            info.launcher_command = pid % 7 == 0;
            return info;
        },
        [](int pid) { return pid % 2 == 0; });
    size_t pos = 0;
    double now = 0;
    while (pos + 2 <= size) {
        const size_t n = std::min<size_t>(size - pos - 2, size_t(data[pos]) | size_t(data[pos + 1]) << 8);
        pos += 2;
        if (decode_ipc_message(bytes + pos, n, m, why) && m.poll) registry.observe(*m.poll, now += 0.5);
        pos += n;
        if (now > 3) registry.refresh(now, 2);
    }
    for (const PolledJob& job : registry.jobs()) (void)job.describe();
    std::string error;
    (void)pick_job(registry.jobs(), "", error);
    return 0;
}
