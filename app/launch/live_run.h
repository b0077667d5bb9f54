// A run being watched: the listener, the launched mpirun, the trace store the data lands in and the trace file it
// is written to, driven by pump() from a frame loop (the GUI) or a progress loop (`ultrascope run`). Nothing here
// blocks: the listener reads on its own thread and the child is polled. A launched run that stops making progress
// (hang_watch.h) is never left hanging: its ranks are asked for their flight recorder dumps, which land in the
// store and the trace, and the run is ended (hung()).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "app/launch/emulated_nodes.h"
#include "app/launch/hang_watch.h"
#include "app/launch/launch_options.h"
#include "app/launch/launcher.h"
#include "app/launch/progress_deadline.h"
#include "profiler/trace/trace_store.h"
#include "profiler/transport/listener.h"
#include "profiler/transport/trace_file.h"

namespace us::app {

struct LiveRunOptions {
    LaunchOptions launch;  // how many ranks and where (launch_options.h: validate()d before anything starts)
    std::vector<std::string> train_args;  // ultrascope-train flags
    std::string train_binary;             // empty: the ultrascope-train next to this program
    std::string trace_path;               // empty: runs/run-<time>.ustrace
    int listen_port = 0;                  // 0: any free port (the address: launch.hosts.stream_listen)
    bool attach_only = false;             // listen for ranks started elsewhere; launch nothing
    std::string token;                    // attach: the token ranks must present (empty: a fresh random one)
    prof::TraceStoreOptions store;        // the in-memory store's cap (the trace file keeps everything)
};

// --store-cap-mib N: the trace store's memory cap in bytes; UserError unless N is a positive whole number.
size_t parse_store_cap_mib(const std::string& text);

class LiveRun {
public:
    // Starts listening and launches; UserError when either cannot start.
    explicit LiveRun(LiveRunOptions options);
    ~LiveRun();

    // Takes what arrived into the store and the trace file. Returns whether the store changed.
    bool pump();
    // The child exited and every rank's stream ended, broke, or had 3 s to arrive after the exit.
    bool finished() const { return m_finished; }
    std::optional<int> exit_code() const { return m_exit; }
    // 0 only when the child exited 0, no rank was lost and the run did not hang.
    int result_code() const;
    // The run stopped making progress: every rank was asked for its flight recorder dump (SIGUSR1 through mpirun),
    // and once they arrived (RankTrace::flight_dump of store(), and the trace file) or a grace passed, the run was
    // ended. The GUI brings its Hang view forward on it.
    bool hung() const { return m_hung; }
    // "the run stopped making progress at step K for S s" once hung(), else empty.
    const std::string& hang_summary() const { return m_hang_summary; }
    // The ranks whose dump arrived since they were asked.
    const std::set<int>& ranks_dumped() const { return m_dumped; }
    void stop();
    // Ends the run because it stopped progressing: `message` (what stalled, since when, what to try) goes to the
    // messages, the whole process tree is ended without blocking (Launcher::end), and the run finishes as failed.
    // pump() calls it when the start-up shows no sign of life for --progress-timeout; a step watch may too.
    void end_stalled(const std::string& message);
    const std::string& stalled() const { return m_stalled; }  // the message, or empty

    const prof::TraceStore& store() const { return m_store; }
    const std::string& trace_path() const { return m_trace_path; }
    const LiveRunOptions& options() const { return m_options; }
    const EmulatedNodes* nodes() const { return m_nodes.get(); }  // null unless launch.hosts.nodes
    const std::vector<std::string>& command_line() const { return m_launcher.command_line(); }
    int threads_per_rank() const { return m_launcher.threads_per_rank(); }  // the compute threads each rank was given
    int port() const { return m_listener->port(); }
    const std::string& token() const { return m_listener->token(); }
    bool attach_only() const { return m_options.attach_only; }
    // Lines worth telling the user: connections, lost ranks, refusals, and the run's own output.
    std::vector<std::string> take_messages();
    std::vector<std::string> lost_ranks() const { return m_lost; }
    double seconds() const;

private:
    void watch_for_hang();

    LiveRunOptions m_options;
    std::string m_trace_path;
    std::unique_ptr<prof::TraceListener> m_listener;
    std::unique_ptr<prof::TraceFileWriter> m_file;
    std::unique_ptr<EmulatedNodes> m_nodes;  // before the launcher: removed after the ranks are stopped
    Launcher m_launcher;
    prof::TraceStore m_store;
    std::optional<int> m_exit;
    std::chrono::steady_clock::time_point m_started, m_exited_at;
    bool m_finished = false;
    std::vector<std::string> m_messages;
    std::vector<std::string> m_lost;
    std::string m_partial_output;
    std::vector<int> m_open_ranks;  // connected, not ended or lost
    bool m_file_error_said = false;
    // Until the first step: no connection, data or output for --progress-timeout S (default 300) ends the launch.
    ProgressDeadline m_startup;
    bool m_stepped = false;
    std::string m_stalled;
    // A run that stops making progress
    static constexpr double kDumpGraceS = 10;  // how long the ranks' dumps may take to arrive
    HangWatch m_hang_watch;
    bool m_flight_recorder = true;  // the ranks keep one (--fr-buffer-size > 0): their dumps are worth waiting for
    bool m_hung = false;
    double m_dumps_asked_s = 0;
    std::set<int> m_dumped;
    std::string m_hang_summary;
};

std::string default_trace_path();

}  // namespace us::app
