// The registry of polling processes and their jobs (poller_registry.h).
#include "profiler/ondemand/poller_registry.h"

#include <fmt/core.h>

#include <algorithm>

namespace us::prof {

const Poller& PollerRegistry::observe(const IpcPoll& poll, double now) {
    const int pid = poll.pids.front();
    auto [it, fresh] = m_pollers.try_emplace(pid);
    Poller& p = it->second;
    if (fresh || !p.alive) {
        p = Poller{};
        p.pid = pid;
        p.first_seen = now;
        p.info = m_reader(pid);
        p.launcher = p.info.launcher_command;
    }
    p.ancestors.assign(poll.pids.begin() + 1, poll.pids.end());
    p.jobid = poll.jobid;
    p.last_seen = now;
    p.alive = true;
    ++p.polls;
    for (int32_t a : p.ancestors) {
        auto anc = m_pollers.find(a);
        if (anc != m_pollers.end()) anc->second.launcher = true;
    }
    for (auto& [other_pid, other] : m_pollers)  // a launcher seen after its children
        if (other_pid != pid && std::find(other.ancestors.begin(), other.ancestors.end(), pid) != other.ancestors.end())
            p.launcher = true;
    return p;
}

void PollerRegistry::refresh(double now, double forget_after_s) {
    for (auto it = m_pollers.begin(); it != m_pollers.end();) {
        it->second.alive = m_alive(it->first);
        if (now - it->second.last_seen > forget_after_s)
            it = m_pollers.erase(it);
        else
            ++it;
    }
}

const Poller* PollerRegistry::find(int pid) const {
    auto it = m_pollers.find(pid);
    return it == m_pollers.end() ? nullptr : &it->second;
}

std::string PollerRegistry::job_key(const Poller& p) const {
    if (p.jobid != 0) return std::to_string(p.jobid);
    int outermost = 0;
    for (int32_t a : p.ancestors)
        if (m_pollers.count(a)) outermost = a;
    if (outermost) return std::to_string(outermost);
    // A rank of torchrun whose agent does not poll: its siblings share the parent.
    if (p.info.rank >= 0 && !p.ancestors.empty() && !p.launcher) return std::to_string(p.ancestors.front());
    return std::to_string(p.pid);
}

std::vector<PolledJob> PollerRegistry::jobs() const {
    std::map<std::string, PolledJob> by_key;
    for (const auto& [pid, p] : m_pollers) {
        PolledJob& job = by_key[job_key(p)];
        job.jobid = p.jobid;
        (p.launcher ? job.launchers : job.ranks).push_back(p);
    }
    std::vector<PolledJob> out;
    for (auto& [key, job] : by_key) {
        job.id = key;
        std::sort(job.ranks.begin(), job.ranks.end(), [](const Poller& a, const Poller& b) {
            return a.info.rank != b.info.rank ? a.info.rank < b.info.rank : a.pid < b.pid;
        });
        for (const Poller& r : job.ranks) {
            const int expected = r.info.local_world_size > 0 ? r.info.local_world_size : r.info.world_size;
            job.expected_ranks = std::max(job.expected_ranks, expected);
        }
        if (job.expected_ranks == 0 && job.launchers.empty()) job.expected_ranks = int(job.ranks.size());
        out.push_back(std::move(job));
    }
    return out;
}

std::string PolledJob::describe() const {
    std::string ranks_text;
    for (const Poller& r : ranks)
        ranks_text += (ranks_text.empty() ? "" : ", ") +
                      (r.info.rank >= 0 ? std::to_string(r.info.rank) : "pid " + std::to_string(r.pid));
    std::string text = ranks.empty()
                           ? fmt::format("job {}: no rank has polled yet", id)
                           : fmt::format("job {}: {} of {} ranks ({})", id, ranks.size(),
                                         expected_ranks > 0 ? std::to_string(expected_ranks) : "?", ranks_text);
    for (const Poller& l : launchers) text += fmt::format(", launcher {}", l.pid);
    return text;
}

const PolledJob* pick_job(const std::vector<PolledJob>& jobs, const std::string& wanted, std::string& error) {
    error.clear();
    std::string listing;
    for (const PolledJob& j : jobs) listing += "\n  " + j.describe();
    if (!wanted.empty()) {
        for (const PolledJob& j : jobs)
            if (j.id == wanted) return &j;
        error = jobs.empty() ? fmt::format("no job {} polls this node (no PyTorch job polls it at all)", wanted)
                             : fmt::format("no job {} polls this node; the jobs that do:{}", wanted, listing);
        return nullptr;
    }
    if (jobs.size() == 1) return &jobs.front();
    error = jobs.empty() ? std::string("no PyTorch job polls this node")
                         : fmt::format("{} jobs poll this node: name one with --job ID:{}", jobs.size(), listing);
    return nullptr;
}

}  // namespace us::prof
