// The node's Kineto daemon (ondemand_daemon.h).
#include "profiler/ondemand/ondemand_daemon.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>

#include "profiler/ondemand/ipc_message.h"

namespace us::prof {

double steady_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

OnDemandDaemon::OnDemandDaemon(const std::string& socket_dir, ProcessInfoReader reader, ProcessAlive alive)
    : m_endpoint(socket_dir), m_registry(std::move(reader), std::move(alive)) {}

OnDemandDaemon::~OnDemandDaemon() {
    m_stop = true;
    if (m_thread.joinable()) m_thread.join();
    if (m_record) std::fclose(m_record);
}

void OnDemandDaemon::start() {
    m_thread = std::thread([this] {
        while (!m_stop) serve_once(100);
    });
}

void OnDemandDaemon::record_to(const std::string& path) {
    std::lock_guard lock(m_mutex);
    m_record = std::fopen(path.c_str(), "w");
    US_CHECK_INPUT(m_record, "cannot write the recording {}", path);
}

void OnDemandDaemon::serve_once(int timeout_ms) {
    std::string bytes;
    IpcPeer peer;
    const bool got = m_endpoint.receive(bytes, peer, timeout_ms);
    const double now = steady_seconds();
    std::string reply;
    {
        std::lock_guard lock(m_mutex);
        if (now - m_last_refresh > 1) {
            m_registry.refresh(now);
            m_last_refresh = now;
        }
        if (!got) return;
        reply = answer(bytes, now);
    }
    if (!reply.empty()) m_endpoint.reply(peer, reply);
}

// Under the lock: what to send back ("" for nothing: a refused datagram gets no answer).
std::string OnDemandDaemon::answer(const std::string& bytes, double now) {
    IpcMessage msg;
    std::string why;
    if (!decode_ipc_message(bytes.data(), bytes.size(), msg, why)) {
        if (m_refusals.size() < 100) m_refusals.push_back("refused a datagram: " + why);
        record(bytes, now, 0);
        return "";
    }
    if (msg.reg) {
        record(bytes, now, 0);
        return encode_ipc_register_reply(int32_t(m_registry.size()));
    }
    const bool first = !m_registry.find(msg.poll->pids.front());
    const Poller& p = m_registry.observe(*msg.poll, now);
    record(bytes, now, first ? p.pid : 0);
    auto it = m_armed.find(p.pid);
    if (it == m_armed.end() || it->second.written) return encode_ipc_config_reply("");
    // Kineto opens FILE.tmp when the trace starts and renames it to FILE when written. Once either exists, asking
    // again would start a second trace: this Kineto takes a request as pending even while it traces.
    std::error_code ec;
    if (std::filesystem::exists(it->second.file, ec)) it->second.written = true;
    if (it->second.written || std::filesystem::exists(it->second.file + ".tmp", ec)) {
        it->second.started = true;
        return encode_ipc_config_reply("");
    }
    ++it->second.sent;
    return encode_ipc_config_reply(it->second.config);
}

void OnDemandDaemon::record(const std::string& bytes, double now, int first_pid) {
    if (!m_record) return;
    nlohmann::json line = {{"t", now}};
    std::string hex;
    for (unsigned char c : bytes) hex += fmt::format("{:02x}", c);
    line["hex"] = hex;
    if (first_pid) {
        const Poller* p = m_registry.find(first_pid);
        line["env"] = {{"pid", first_pid},
                       {"rank", p->info.rank},
                       {"world_size", p->info.world_size},
                       {"local_rank", p->info.local_rank},
                       {"local_world_size", p->info.local_world_size},
                       {"launcher_command", p->info.launcher_command},
                       {"command", p->info.command}};
    }
    std::fprintf(m_record, "%s\n", line.dump().c_str());
    std::fflush(m_record);
}

std::vector<PolledJob> OnDemandDaemon::jobs() {
    std::lock_guard lock(m_mutex);
    return m_registry.jobs();
}

void OnDemandDaemon::arm(int pid, const std::string& config, const std::string& file) {
    std::lock_guard lock(m_mutex);
    m_armed[pid] = Armed{config, file};
}

void OnDemandDaemon::disarm(int pid) {
    std::lock_guard lock(m_mutex);
    m_armed.erase(pid);
}

ArmStatus OnDemandDaemon::arm_status(int pid) {
    std::lock_guard lock(m_mutex);
    auto it = m_armed.find(pid);
    if (it == m_armed.end()) return {};
    return {true, it->second.sent, it->second.started, it->second.written};
}

std::vector<std::string> OnDemandDaemon::take_refusals() {
    std::lock_guard lock(m_mutex);
    return std::exchange(m_refusals, {});
}

}  // namespace us::prof
