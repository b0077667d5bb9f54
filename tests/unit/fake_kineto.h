// Fake Kineto processes for the capture's tests: a thread that polls a daemon in the test's own socket directory
// with the pids it is given and, when asked, writes the file asked for as Kineto does (a temporary file renamed into
// place, the first request dropped as before a job's first optimizer step); and the environments of a fake torchrun
// job (launcher 100, ranks 101 and 102).
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "profiler/ondemand/ipc_endpoint.h"
#include "profiler/ondemand/ipc_message.h"
#include "profiler/ondemand/poller_registry.h"
#include "profiler/ondemand/trace_request.h"
#include "test_util.h"

namespace us::test {

// One fake Kineto process: polls every 50 ms; when asked, writes BASE_PID.json (unless `writes` is false).
struct FakeKineto {
    std::string dir;
    std::vector<int32_t> pids;
    bool writes = true;
    std::string content;  // what the file holds ("": an empty trace naming the pid)
    std::atomic<bool> stop{false};
    std::atomic<int> asked{0};
    std::thread thread;

    void start() {
        namespace fs = std::filesystem;
        thread = std::thread([this] {
            while (!stop) {
                std::string answer, why;
                if (prof::ipc_send_and_receive(dir, prof::encode_ipc_poll({2, 0, pids}), answer, 500)) {
                    const auto config = prof::decode_ipc_config_reply(answer.data(), answer.size(), why);
                    const size_t at = config ? config->find("ACTIVITIES_LOG_FILE=") : std::string::npos;
                    if (at != std::string::npos) {
                        ++asked;
                        const std::string base = config->substr(at + 20, config->find('\n', at) - at - 20);
                        const std::string file = prof::trace_request_file(base, pids[0]);
                        if (writes && asked >= 2) {  // the first request is "dropped", as before a first step
                            test::write_file(file + ".tmp",
                                             !content.empty()
                                                 ? content
                                                 : "{\"traceEvents\": [], \"pid\": " + std::to_string(pids[0]) + "}");
                            fs::rename(file + ".tmp", file);
                        }
                    }
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
            }
        });
    }
    ~FakeKineto() {
        stop = true;
        if (thread.joinable()) thread.join();
    }
};

inline prof::ProcessInfo two_ranks(int pid) {
    prof::ProcessInfo info;
    info.readable = true;
    if (pid == 101 || pid == 102) {
        info.rank = pid - 101;
        info.world_size = info.local_world_size = 2;
        info.local_rank = pid - 101;
    }
    info.launcher_command = pid == 100;  // torchrun's command line
    return info;
}

}  // namespace us::test
