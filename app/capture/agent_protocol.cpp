// The agent's frames and requests (agent_protocol.h).
#include "app/capture/agent_protocol.h"

#include <fmt/core.h>

#include <cstring>

#include "profiler/ondemand/ondemand_daemon.h"
#include "profiler/transport/protocol.h"
#include "profiler/transport/socket.h"

namespace us::app {

nlohmann::json agent_request_json(const AgentRequest& r) {
    return {{"version", kAgentProtocolVersion},
            {"token", r.token},
            {"op", r.op},
            {"job", r.job},
            {"steps", r.steps},
            {"roundup", r.roundup},
            {"timeout_s", r.timeout_s}};
}

namespace {

nlohmann::json poller_json(const prof::Poller& p, double now) {
    return {{"pid", p.pid},
            {"rank", p.info.rank},
            {"world_size", p.info.world_size},
            {"local_rank", p.info.local_rank},
            {"command", p.info.command},
            {"alive", p.alive},
            {"polls", p.polls},
            {"last_seen_s", now - p.last_seen}};
}

}  // namespace

nlohmann::json jobs_json(const std::vector<prof::PolledJob>& jobs) {
    const double now = prof::steady_seconds();
    nlohmann::json out = nlohmann::json::array();
    for (const prof::PolledJob& job : jobs) {
        nlohmann::json j = {
            {"id", job.id}, {"jobid", job.jobid}, {"expected_ranks", job.expected_ranks}, {"describe", job.describe()}};
        j["ranks"] = nlohmann::json::array();
        j["launchers"] = nlohmann::json::array();
        for (const prof::Poller& p : job.ranks) j["ranks"].push_back(poller_json(p, now));
        for (const prof::Poller& p : job.launchers) j["launchers"].push_back(poller_json(p, now));
        out.push_back(std::move(j));
    }
    return out;
}

nlohmann::json rank_progress_json(const RankProgress& r) {
    return {{"rank", r.rank}, {"pid", r.pid}, {"state", int(r.state)}, {"requests", r.requests}, {"file", r.file}};
}

bool parse_rank_progress(const nlohmann::json& j, RankProgress& out) {
    if (!j.is_object() || !j.contains("pid") || !j["pid"].is_number_integer() || !j.contains("state") ||
        !j["state"].is_number_integer())
        return false;
    if ((j.contains("rank") && !j["rank"].is_number_integer()) ||
        (j.contains("requests") && !j["requests"].is_number_integer()) ||
        (j.contains("file") && !j["file"].is_string()))
        return false;
    const int state = j["state"].get<int>();
    if (state < 0 || state > int(RankState::written)) return false;
    out.rank = j.value("rank", -1), out.pid = j["pid"].get<int>(), out.state = RankState(state);
    out.requests = j.value("requests", 0), out.file = j.value("file", std::string());
    return true;
}

bool parse_agent_request(const std::string& frame, AgentRequest& out, std::string& error) {
    const nlohmann::json j = nlohmann::json::parse(frame, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        error = "the request is not a JSON object";
        return false;
    }
    if (!j.contains("version") || !j["version"].is_number_integer() || j["version"] != kAgentProtocolVersion) {
        error = fmt::format(
            "the request is not of agent protocol version {} (client and agent differ: use the "
            "same ultrascope on both)",
            kAgentProtocolVersion);
        return false;
    }
    out = {};
    // Every field is checked for its type before it is read: the request comes from the network, before its token
    // is checked (a number where a string belongs threw out of the agent).
    for (const char* key : {"token", "op"})
        if (j.contains(key) && !j[key].is_string()) {
            error = fmt::format("'{}' must be a string", key);
            return false;
        }
    out.token = j.value("token", std::string());
    out.op = j.value("op", std::string());
    if (out.op != "jobs" && out.op != "capture") {
        error = fmt::format("unknown request '{}' (the agent answers 'jobs' and 'capture')", out.op);
        return false;
    }
    if (j.contains("job") && !j["job"].is_string()) {
        error = "'job' must be a string";
        return false;
    }
    out.job = j.value("job", std::string());
    const auto int_field = [&](const char* key, int& field, int lo, int hi) {
        if (!j.contains(key)) return true;
        if (!j[key].is_number_integer() || j[key].get<int64_t>() < lo || j[key].get<int64_t>() > hi) {
            error = fmt::format("'{}' must be an integer from {} to {}", key, lo, hi);
            return false;
        }
        field = j[key].get<int>();
        return true;
    };
    if (!int_field("steps", out.steps, 1, 1000) || !int_field("roundup", out.roundup, 1, 1000000)) return false;
    if (j.contains("timeout_s")) {
        if (!j["timeout_s"].is_number() || j["timeout_s"].get<double>() <= 0 || j["timeout_s"].get<double>() > 86400) {
            error = "'timeout_s' must be a number of seconds from 0 to 86400";
            return false;
        }
        out.timeout_s = j["timeout_s"].get<double>();
    }
    return true;
}

bool agent_token_matches(const std::string& presented, const std::string& token) {
    return presented.size() == prof::kTokenBytes && prof::tokens_equal(presented.data(), token);
}

bool write_frame(int fd, const std::string& bytes, int timeout_ms) {
    const uint32_t n = uint32_t(bytes.size());
    char length[4];
    for (int i = 0; i < 4; ++i) length[i] = char((n >> (8 * i)) & 0xff);
    return prof::send_all(fd, length, 4, timeout_ms) && prof::send_all(fd, bytes.data(), bytes.size(), timeout_ms);
}

bool read_frame(int fd, std::string& bytes, uint32_t max_bytes, int timeout_ms, std::string& error) {
    unsigned char length[4];
    if (!prof::recv_exact(fd, reinterpret_cast<char*>(length), 4, timeout_ms)) {
        error = "the connection closed or went quiet";
        return false;
    }
    const uint32_t n =
        uint32_t(length[0]) | uint32_t(length[1]) << 8 | uint32_t(length[2]) << 16 | uint32_t(length[3]) << 24;
    if (n > max_bytes) {
        error = fmt::format("a frame of {} bytes, more than the {} allowed here", n, max_bytes);
        return false;
    }
    bytes.resize(n);
    if (n && !prof::recv_exact(fd, bytes.data(), n, timeout_ms)) {
        error = "the connection closed in the middle of a frame";
        return false;
    }
    return true;
}

}  // namespace us::app
