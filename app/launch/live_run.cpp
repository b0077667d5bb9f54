#include "app/launch/live_run.h"

#include <fmt/format.h>
#include <unistd.h>

#include <csignal>
#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>

#include "app/launch/hostfile.h"
#include "common/core/check.h"
#include "common/settings/cli.h"
#include "profiler/transport/protocol.h"

namespace us::app {

std::string default_trace_path() {
    const std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    std::filesystem::create_directories("runs");
    std::string path = fmt::format("runs/run-{}.ustrace", stamp);
    for (int i = 2; std::filesystem::exists(path); ++i) path = fmt::format("runs/run-{}-{}.ustrace", stamp, i);
    return path;
}

size_t parse_store_cap_mib(const std::string& text) {
    char* end = nullptr;
    const long long mib = std::strtoll(text.c_str(), &end, 10);
    US_CHECK_INPUT(!text.empty() && *end == '\0' && mib > 0 && mib <= (1ll << 24),
                   "--store-cap-mib '{}': expected a positive number of MiB, e.g. 2048 (the trace file keeps every "
                   "event whatever the cap)",
                   text);
    return size_t(mib) << 20;
}

namespace {

// The address ranks connect back to. Ranks on this machine reach a loopback listener; ranks on other hosts need the
// listener on an address they can reach (--listen ADDR, or 0.0.0.0 and this machine's host name).
std::string connect_address(const LaunchSpec& spec, const std::string& listen_host,
                            const std::vector<HostEntry>& hosts) {
    bool remote = spec.launcher == "srun";  // Slurm places ranks on the allocation's nodes
    for (const auto& h : hosts) remote |= !is_local_host(h.name);
    const bool loopback = listen_host == "127.0.0.1" || listen_host == "localhost" || listen_host == "::1";
    US_CHECK_INPUT(!remote || !loopback,
                   "ranks on other hosts cannot stream to {} (this machine's loopback): add --listen ADDR with this "
                   "machine's address on the network the hosts share (or --listen 0.0.0.0 to take every interface), "
                   "and open its port (--port P) in the firewall",
                   listen_host);
    if (listen_host != "0.0.0.0") return listen_host;
    if (!remote) return "127.0.0.1";
    char self[256] = {};
    ::gethostname(self, sizeof self - 1);
    return self;
}

LaunchSpec launch_spec_of(const LiveRunOptions& o) {
    LaunchSpec spec;
    spec.ranks = o.launch.ranks;
    spec.train_args = o.train_args;
    spec.train_binary = o.train_binary;
    spec.mpirun = o.launch.mpirun;
    spec.launcher = o.launch.hosts.launcher;
    spec.hostfile = o.launch.hosts.hostfile;
    return spec;
}

// What the run's own flags say about hangs: its --hang-timeout (0: sized from the steps) and whether its ranks keep
// a flight recorder. Flags that do not parse were refused before the launch; the defaults stand then.
HangWatch hang_watch_of(const std::vector<std::string>& train_args, bool& flight_recorder) {
    std::vector<const char*> argv = {"ultrascope-train"};
    for (const auto& a : train_args) argv.push_back(a.c_str());
    try {
        const TrainConfig cfg = parse_train_args(int(argv.size()), argv.data()).cmd.config;
        flight_recorder = cfg.fr_buffer_size > 0;
        return HangWatch(cfg.hang_timeout);
    } catch (const UserError&) {
        return HangWatch();
    }
}

}  // namespace

LiveRun::LiveRun(LiveRunOptions options)
    : m_options(std::move(options)),
      m_store(m_options.store),
      m_startup("the run's start (the launch, its ranks connecting, their first step)",
                m_options.launch.progress_timeout_s > 0 ? m_options.launch.progress_timeout_s : 300) {
    LaunchSpec spec = launch_spec_of(m_options);
    std::string listen_host = m_options.launch.hosts.stream_listen;
    if (!m_options.attach_only) validate(m_options.launch);  // everything that can be refused, before anything is made
    // Emulated nodes: their hostfile, mpirun's agent and the bridge's address, for the launch below.
    if (const NodeLinks& links = m_options.launch.hosts.nodes; links.count > 0 && !m_options.attach_only) {
        m_nodes = std::make_unique<EmulatedNodes>(links, spec.ranks);
        spec.hostfile = m_nodes->hostfile();
        spec.mpirun_args = m_nodes->mpirun_args();
        spec.hosts_share_cores = true;
        // the ranks must reach the listener from their namespaces: the bridge's address, unless one was chosen
        if (listen_host == "127.0.0.1" || listen_host.empty()) listen_host = m_nodes->bridge_address();
    }
    const std::string connect_host =
        m_options.attach_only ? std::string() : connect_address(spec, listen_host, check_launch_spec(spec));
    m_trace_path = m_options.trace_path.empty() ? default_trace_path() : m_options.trace_path;
    m_listener = std::make_unique<prof::TraceListener>(
        listen_host, m_options.listen_port, m_options.token.empty() ? prof::random_token() : m_options.token);
    m_file = std::make_unique<prof::TraceFileWriter>(m_trace_path);
    m_started = std::chrono::steady_clock::now();
    if (m_options.attach_only) return;
    m_hang_watch = hang_watch_of(m_options.train_args, m_flight_recorder);
    spec.connect = fmt::format("{}:{}", connect_host, m_listener->port());
    spec.token = m_listener->token();
    spec.train_args.push_back("--quiet");  // progress is shown here, from the stream
    m_launcher.start(spec);
    if (m_nodes) m_messages = m_nodes->cleaned();  // what killed runs had left, removed (stale_runs.h)
    for (std::string& note : m_launcher.take_notes()) m_messages.push_back(std::move(note));
    m_startup.progress("");  // its clock starts with the launch
}

LiveRun::~LiveRun() {
    if (m_launcher.running()) m_launcher.stop(2000);
}

double LiveRun::seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - m_started).count();
}

bool LiveRun::pump() {
    bool changed = false;
    std::vector<prof::ListenerMessage> messages;
    m_listener->poll(messages);
    if (!m_file_error_said && !m_file->error().empty()) {  // a full disk: the trace stops, the run goes on
        m_file_error_said = true;
        m_messages.push_back(m_file->error());
    }
    for (auto& m : messages) {
        using K = prof::ListenerMessage::Kind;
        switch (m.kind) {
            case K::connected:
                m_open_ranks.push_back(m.rank);
                m_startup.progress(fmt::format("rank {} connected", m.rank));
                break;
            case K::chunk:
                if (m.chunk.kind == prof::ChunkKind::flight_dump) m_dumped.insert(m.rank);
                m_file->append(m.raw);
                try {
                    m_store.add_chunk(m.chunk);
                } catch (const UserError& e) {
                    m_messages.push_back(fmt::format("rank {}: {}", m.rank, e.what()));
                }
                changed = true;
                m_startup.progress(fmt::format("data from rank {}", m.rank));
                break;
            case K::ended:
                std::erase(m_open_ranks, m.rank);
                break;
            case K::lost: {
                std::erase(m_open_ranks, m.rank);
                // The file records the loss too, as an end chunk written on the rank's behalf.
                const nlohmann::json note = {{"clean", false}, {"lost", true}, {"reason", m.text}};
                m_file->append(
                    prof::encode_chunk(prof::ChunkKind::end, uint32_t(m.rank), UINT32_MAX, nullptr, note.dump()));
                m_store.mark_lost(m.rank, m.text);
                m_lost.push_back(fmt::format("rank {}: {}", m.rank, m.text));
                m_messages.push_back(fmt::format("lost rank {}: {}", m.rank, m.text));
                changed = true;
                break;
            }
            case K::refused:
                m_messages.push_back("refused a connection: " + m.text);
                break;
        }
    }
    m_partial_output += m_launcher.take_output();
    for (size_t nl; (nl = m_partial_output.find('\n')) != std::string::npos;) {
        m_messages.push_back(m_partial_output.substr(0, nl));
        m_startup.progress(last_line_of(m_messages.back()));
        m_partial_output.erase(0, nl + 1);
    }
    m_stepped = m_stepped || m_store.latest_counter("loss");
    if (!m_stepped && !m_exit && !m_options.attach_only && m_stalled.empty() && m_startup.expired())
        end_stalled(m_startup.stalled_message(
                        "Its ranks may be waiting for one that never started (a node's daemon, a rank out of memory: "
                        "`free -m`), or this machine is too busy: run it again when it is quieter, or give it longer "
                        "(--progress-timeout S).") +
                    " Its processes then: " + m_launcher.describe_tree() + ".");
    watch_for_hang();
    if (!m_exit && !m_options.attach_only) {
        m_exit = m_launcher.poll();
        if (m_exit) m_exited_at = std::chrono::steady_clock::now();
    }
    if (m_exit && !m_finished) {
        const double since = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_exited_at).count();
        if ((m_open_ranks.empty() && since > 0.2) || since > 3.0) {
            for (int r : m_open_ranks) {
                const nlohmann::json note = {
                    {"clean", false}, {"lost", true}, {"reason", "the run exited before this rank's stream ended"}};
                m_file->append(prof::encode_chunk(prof::ChunkKind::end, uint32_t(r), UINT32_MAX, nullptr, note.dump()));
                m_store.mark_lost(r, "the run exited before this rank's stream ended");
                m_lost.push_back(fmt::format("rank {}: the run exited before its stream ended", r));
            }
            m_open_ranks.clear();
            if (!m_partial_output.empty()) m_messages.push_back(m_partial_output);
            m_partial_output.clear();
            m_file->close();
            m_finished = true;
            changed = true;
        }
    }
    if (changed) m_store.finalize();
    return changed;
}

// A launched run that makes no step for the hang limit: every rank is asked for its dump (mpirun passes SIGUSR1 on),
// and once all arrived, or after a grace, the run is stopped. Never a silent hang.
void LiveRun::watch_for_hang() {
    if (m_options.attach_only || m_exit || m_finished || !m_stalled.empty()) return;
    const double now = seconds();
    if (!m_hung) {
        if (const auto latest = m_store.latest_counter("step_ms"))
            m_hang_watch.observe(latest->second.step, latest->second.value, now);
        if (!m_hang_watch.stalled(now)) return;
        m_hung = true;
        m_hang_summary = fmt::format("the run stopped making progress at step {} for {:.0f} s",
                                     m_hang_watch.last_step() + 1, m_hang_watch.since_progress_s(now));
        m_messages.push_back(fmt::format("{} ({}): asking every rank for its flight recorder dump (SIGUSR1 through {})",
                                         m_hang_summary, m_hang_watch.limit_said(), m_options.launch.hosts.launcher));
        m_dumped.clear();
        m_dumps_asked_s = now;
        m_launcher.signal(SIGUSR1);
        return;
    }
    const bool all = int(m_dumped.size()) >= m_options.launch.ranks;
    if (!all && m_flight_recorder && now - m_dumps_asked_s < kDumpGraceS) return;
    end_stalled(fmt::format("{}: {} of {} rank(s) sent their flight recorder dump; ending the run", m_hang_summary,
                            m_dumped.size(), m_options.launch.ranks));  // without blocking: the GUI's frames go on
}

int LiveRun::result_code() const {
    if (m_hung) return m_exit && *m_exit != 0 ? *m_exit : 1;
    if (m_exit && *m_exit != 0) return *m_exit;
    if (!m_stalled.empty()) return 1;
    return m_lost.empty() ? 0 : 1;
}

void LiveRun::stop() { m_launcher.stop(); }

void LiveRun::end_stalled(const std::string& message) {
    if (!m_stalled.empty()) return;
    m_stalled = message;
    m_messages.push_back(message);
    m_launcher.end();
}

std::vector<std::string> LiveRun::take_messages() {
    std::vector<std::string> out;
    out.swap(m_messages);
    return out;
}

}  // namespace us::app
