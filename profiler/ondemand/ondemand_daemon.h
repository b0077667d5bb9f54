// The node's Kineto daemon: owns the "dynolog" endpoint, answers every poll within Kineto's ~90 ms on a thread of
// its own, keeps the registry of polling processes, and answers an armed process with its trace request on each
// poll until the trace it was asked for has started: a request that arrives before the job's first optimizer step is
// dropped by Kineto, so sending it again is how it gets through; one that arrives while a trace runs is queued, so
// it is never sent once Kineto has opened the file. Used by `ultrascope agent` and by `ultrascope capture` when no
// agent runs on the node.
#pragma once

#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "profiler/ondemand/ipc_endpoint.h"
#include "profiler/ondemand/poller_registry.h"

namespace us::prof {

struct ArmStatus {
    bool armed = false;
    int requests_sent = 0;  // polls answered with the request
    bool tracing = false;   // Kineto opened the file (FILE.tmp): asked no more
    bool file_written = false;
};

class OnDemandDaemon {
public:
    // Binds the endpoint now (IpcNameTaken when something owns it). The reader and alive check are /proc's unless
    // a test gives its own.
    explicit OnDemandDaemon(const std::string& socket_dir, ProcessInfoReader reader = read_process_info,
                            ProcessAlive alive = process_alive);
    ~OnDemandDaemon();  // stops serving
    OnDemandDaemon(const OnDemandDaemon&) = delete;
    OnDemandDaemon& operator=(const OnDemandDaemon&) = delete;

    void start();                     // serves on a thread until destroyed
    void serve_once(int timeout_ms);  // or one datagram at a time, on the caller's thread
    // Every datagram received is appended to PATH as a JSON line (time, bytes in hex, the sender's environment
    // at its first poll): the recordings the replay test reads.
    void record_to(const std::string& path);

    std::vector<PolledJob> jobs();
    void arm(int pid, const std::string& config, const std::string& file);
    void disarm(int pid);
    ArmStatus arm_status(int pid);
    // Datagrams refused since the last call, each with why (the agent prints them).
    std::vector<std::string> take_refusals();
    const std::string& description() const { return m_endpoint.description(); }

private:
    struct Armed {
        std::string config, file;
        int sent = 0;
        bool started = false, written = false;
    };
    std::string answer(const std::string& bytes, double now);
    void record(const std::string& bytes, double now, int first_pid);

    IpcEndpoint m_endpoint;
    std::mutex m_mutex;
    PollerRegistry m_registry;
    std::map<int, Armed> m_armed;
    std::vector<std::string> m_refusals;
    std::FILE* m_record = nullptr;
    double m_last_refresh = 0;
    std::atomic<bool> m_stop{false};
    std::thread m_thread;
};

double steady_seconds();

}  // namespace us::prof
