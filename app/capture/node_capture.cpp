// One node's part of a capture (node_capture.h). Two phases: wait until the job's ranks have all polled, then arm
// them and watch for their files, with a progress line whenever a rank's state changes.
#include "app/capture/node_capture.h"

#include <fmt/core.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <thread>

#include "common/core/format.h"
#include "profiler/ondemand/trace_request.h"

namespace us::app {
namespace {

namespace fs = std::filesystem;
using prof::steady_seconds;

constexpr double kLoneSettleS = 1.0;

void nap() { std::this_thread::sleep_for(std::chrono::milliseconds(200)); }

std::string rank_name(const prof::Poller& p) {
    return p.info.rank >= 0 ? fmt::format("rank {} (pid {})", p.info.rank, p.pid) : fmt::format("pid {}", p.pid);
}

bool job_complete(const prof::PolledJob& job) {
    if (job.ranks.empty()) return false;
    // A process without RANK that no other poller descends from yet may be a launcher whose workers have not
    // polled: it is taken for a lone job only from its second poll and a second after its first (a worker's poll
    // can be held up to its 500 ms reply timeout). Should its workers poll even later, check_ranks drops it.
    const prof::Poller& only = job.ranks[0];
    if (job.launchers.empty() && job.ranks.size() == 1 && only.info.rank < 0 &&
        (only.polls < 2 || steady_seconds() - only.first_seen < kLoneSettleS))
        return false;
    return job.expected_ranks == 0 || int(job.ranks.size()) >= job.expected_ranks;
}

// Phase 1: the job, once every rank of it on this node has polled.
bool wait_for_job(prof::OnDemandDaemon& daemon, const NodeCaptureRequest& request, double deadline,
                  const CaptureProgress& progress, prof::PolledJob& job, std::string& error) {
    std::string last;
    for (;;) {
        const std::vector<prof::PolledJob> jobs = daemon.jobs();
        std::string why;
        const prof::PolledJob* found = prof::pick_job(jobs, request.job, why);
        std::string line;
        if (found && job_complete(*found)) {
            job = *found;
            progress(found->describe());
            return true;
        }
        if (found)
            line = "waiting for every rank to poll: " + found->describe();
        else if (request.job.empty() && jobs.size() > 1) {
            error = why;
            return false;
        } else
            line = request.job.empty() ? "waiting for a PyTorch job started with KINETO_USE_DAEMON=1 to poll"
                                       : fmt::format("waiting for job {} to poll", request.job);
        if (line != last) progress(last = line);
        if (request.cancel && *request.cancel) {
            error = request.cancelled_why;
            return false;
        }
        if (steady_seconds() > deadline) {
            if (found)
                error = fmt::format("not every rank of the job polled within the timeout: {}", found->describe());
            else if (!request.job.empty())
                error = why;
            else
                error = "no PyTorch job polled this node's daemon (" + daemon.description() +
                        ") within the timeout: start the job with KINETO_USE_DAEMON=1 (docs/attach-pytorch.md)";
            return false;
        }
        nap();
    }
}

struct Watch {
    prof::Poller poller;
    std::string file, shown;
    bool written = false;
};

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

enum class Watching { going, written, failed, launcher_armed };

// Phase 2, one round: each rank's state. failed (with `error`) when a rank exited before writing its file;
// launcher_armed when a process taken for a lone job has since been seen to launch others (its workers' first polls
// came late): its file would be the launcher's, so the job is looked for again.
Watching check_ranks(prof::OnDemandDaemon& daemon, const NodeCaptureRequest& request, const std::string& job_id,
                     std::vector<Watch>& watches, const CaptureProgress& progress, std::string& error) {
    std::map<int, bool> alive;
    std::set<int> launchers;
    for (const prof::PolledJob& j : daemon.jobs()) {
        for (const prof::Poller& p : j.ranks) alive[p.pid] = p.alive;
        for (const prof::Poller& p : j.launchers) launchers.insert(p.pid);
    }
    for (Watch& w : watches) {
        std::error_code ec;
        w.written = w.written || fs::exists(w.file, ec);
        if (!w.written && launchers.count(w.poller.pid)) {
            progress(
                fmt::format("pid {} launches the ranks that polled since: looking for its job again", w.poller.pid));
            return Watching::launcher_armed;
        }
        const prof::ArmStatus s = daemon.arm_status(w.poller.pid);
        const std::string armed = fmt::format("{}: armed, waiting for its next poll", rank_name(w.poller));
        std::string line;
        RankProgress state{w.poller.info.rank, w.poller.pid, RankState::waiting_for_poll, s.requests_sent, {}};
        if (w.written) {
            state.state = RankState::written, state.file = w.file;
            line =
                fmt::format("{}: wrote {} ({})", rank_name(w.poller), w.file, format_bytes(fs::file_size(w.file, ec)));
        } else if (alive.count(w.poller.pid) && !alive[w.poller.pid]) {
            error = fmt::format("{} of job {} exited before writing its trace: the job ended mid-capture",
                                rank_name(w.poller), job_id);
            return Watching::failed;
        } else if (s.tracing) {
            state.state = RankState::tracing;
            line = fmt::format("{}: tracing (asked {} time{})", rank_name(w.poller), s.requests_sent,
                               s.requests_sent == 1 ? "" : "s");
        } else if (s.requests_sent == 0) {
            line = armed;
        } else {
            state.state = RankState::asked;
            line = fmt::format("{}: asked {} time{}, waiting for its trace", rank_name(w.poller), s.requests_sent,
                               s.requests_sent == 1 ? "" : "s");
        }
        if (line == w.shown) continue;
        // Every rank was armed before it is first seen here, but its poll can beat this first look (the daemon's
        // thread answers it at once): its first event is still "armed", what happened, then where it got to.
        if (w.shown.empty() && state.state != RankState::waiting_for_poll) {
            if (request.on_rank)
                request.on_rank(RankProgress{state.rank, state.pid, RankState::waiting_for_poll, 0, {}});
            progress(armed);
        }
        if (request.on_rank) request.on_rank(state);
        progress(w.shown = line);
    }
    return Watching::going;
}

std::string timeout_error(const std::vector<Watch>& watches, double timeout_s, int roundup,
                          prof::OnDemandDaemon& daemon) {
    std::string missing;
    for (const Watch& w : watches)
        if (!w.written)
            missing += fmt::format("\n  {} (asked {} times)", rank_name(w.poller),
                                   daemon.arm_status(w.poller.pid).requests_sent);
    return fmt::format(
        "{} rank(s) did not write a trace within {:.0f} s:{}\nA rank is traced from the next multiple of {} "
        "optimizer steps: is it still stepping its optimizer? (a lower --roundup or a longer --timeout)",
        std::count_if(watches.begin(), watches.end(), [](const Watch& w) { return !w.written; }), timeout_s, missing,
        roundup);
}

// Arms every rank of `job` for one trace of the request's steps.
std::vector<Watch> arm_ranks(prof::OnDemandDaemon& daemon, const NodeCaptureRequest& request,
                             const prof::PolledJob& job) {
    const prof::TraceRequest trace{request.steps, request.roundup, prof::new_capture_tag()};
    std::vector<Watch> watches;
    for (const prof::Poller& p : job.ranks) {
        const std::string base = prof::trace_request_base(trace, p.info.trace_dir);
        watches.push_back({p, prof::trace_request_file(base, p.pid), "", false});
        daemon.arm(p.pid, prof::trace_request_config(trace, base), watches.back().file);
    }
    return watches;
}

// Phase 2: rounds until every rank wrote its file, a rank died, the capture was cancelled or timed out (failed,
// with `error`), or a watched process turned out to launch the others.
Watching watch_ranks(prof::OnDemandDaemon& daemon, const NodeCaptureRequest& request, const std::string& job_id,
                     double deadline, std::vector<Watch>& watches, const CaptureProgress& progress,
                     std::string& error) {
    for (;;) {
        const Watching round = check_ranks(daemon, request, job_id, watches, progress, error);
        if (round != Watching::going) return round;
        if (std::all_of(watches.begin(), watches.end(), [](const Watch& w) { return w.written; }))
            return Watching::written;
        if (request.cancel && *request.cancel) {
            error = request.cancelled_why;
            return Watching::failed;
        }
        if (steady_seconds() > deadline) {
            error = timeout_error(watches, request.timeout_s, request.roundup, daemon);
            return Watching::failed;
        }
        nap();
    }
}

// A rank's request withdrawn and Kineto's files removed (what the capture keeps is what it read).
void release(prof::OnDemandDaemon& daemon, const Watch& w) {
    daemon.disarm(w.poller.pid);
    std::error_code ec;
    fs::remove(w.file, ec);
    fs::remove(w.file + ".tmp", ec);  // a trace cut short by a failed capture
}

}  // namespace

const char* rank_state_name(RankState state) {
    switch (state) {
        case RankState::waiting_for_poll:
            return "waiting for poll";
        case RankState::asked:
            return "asked again";
        case RankState::tracing:
            return "tracing";
        case RankState::written:
            return "written";
    }
    return "?";
}

std::string this_host_name() {
    char name[256] = {};
    ::gethostname(name, sizeof(name) - 1);
    return name;
}

NodeCaptureResult capture_on_node(prof::OnDemandDaemon& daemon, const NodeCaptureRequest& request,
                                  const CaptureProgress& progress) {
    NodeCaptureResult result;
    const double deadline = steady_seconds() + request.timeout_s;
    std::vector<Watch> watches;
    Watching outcome = Watching::launcher_armed;
    while (outcome == Watching::launcher_armed) {
        prof::PolledJob job;
        if (!wait_for_job(daemon, request, deadline, progress, job, result.error)) return result;
        result.job_id = job.id;
        watches = arm_ranks(daemon, request, job);
        outcome = watch_ranks(daemon, request, job.id, deadline, watches, progress, result.error);
        if (outcome == Watching::launcher_armed)
            for (const Watch& w : watches) release(daemon, w);  // nothing of a launcher's is kept
    }
    const std::string host = this_host_name();
    for (const Watch& w : watches) {
        if (outcome == Watching::written) {
            CapturedTrace r;
            r.rank = w.poller.info.rank, r.world_size = w.poller.info.world_size;
            r.local_rank = w.poller.info.local_rank, r.pid = w.poller.pid, r.host = host;
            r.raw_trace = w.file;  // removed by release(): what the capture keeps is raw_bytes
            r.raw_bytes = read_all(w.file);
            result.ranks.push_back(std::move(r));
        }
        release(daemon, w);
    }
    result.ok = outcome == Watching::written;
    return result;
}

}  // namespace us::app
