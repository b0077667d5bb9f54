// The processes that poll this node's daemon, grouped into jobs. A poll names the sender and its ancestors, so the
// registry sees the launcher tree: a poller that is another poller's ancestor is a launcher (torchrun's agent polls
// too) and is never armed; the others are the ranks. A job is the Slurm job id when there is one, else the
// outermost polling ancestor (torchrun), else the rank's parent: what the user names with --job.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "profiler/ondemand/ipc_message.h"
#include "profiler/ondemand/process_info.h"

namespace us::prof {

struct Poller {
    int pid = 0;
    std::vector<int32_t> ancestors;  // parent first
    int64_t jobid = 0;
    ProcessInfo info;
    double first_seen = 0, last_seen = 0;  // seconds on the caller's clock
    int64_t polls = 0;
    bool launcher = false;  // another poller's ancestor
    bool alive = true;
};

struct PolledJob {
    std::string id;  // the Slurm job id, or the launcher's (or the lone process's) pid
    int64_t jobid = 0;
    std::vector<Poller> ranks;      // by rank, then pid
    std::vector<Poller> launchers;  // never armed
    int expected_ranks = 0;         // LOCAL_WORLD_SIZE (or WORLD_SIZE) as the ranks' environment says; 0: unknown
    std::string describe() const;   // "job 4242: 2 of 2 ranks (0, 1), launcher 4240"
};

class PollerRegistry {
public:
    explicit PollerRegistry(ProcessInfoReader reader = read_process_info, ProcessAlive alive = process_alive)
        : m_reader(std::move(reader)), m_alive(std::move(alive)) {}

    // Records a poll at time `now`; the environment is read at a process's first poll only.
    const Poller& observe(const IpcPoll& poll, double now);
    // Marks processes that exited, and forgets those unseen for `forget_after_s`.
    void refresh(double now, double forget_after_s = 60);
    const Poller* find(int pid) const;
    std::vector<PolledJob> jobs() const;
    size_t size() const { return m_pollers.size(); }

private:
    std::string job_key(const Poller& p) const;

    ProcessInfoReader m_reader;
    ProcessAlive m_alive;
    std::map<int, Poller> m_pollers;
};

// The job `wanted` names among `jobs` (by id), or the only job when `wanted` is empty. Empty `error` on success;
// else what is wrong and which jobs there are.
const PolledJob* pick_job(const std::vector<PolledJob>& jobs, const std::string& wanted, std::string& error);

}  // namespace us::prof
