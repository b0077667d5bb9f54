// Datagrams recorded from real Kineto (tests/data/capture_protocol/record.sh: a 2-rank torchrun job with
// KINETO_USE_DAEMON=1, torch version in torch_version.txt) replayed through the decoder and the registry, so CI
// checks the protocol against what PyTorch really sends without having torch.
#include <fstream>

#include "profiler/ondemand/ipc_message.h"
#include "profiler/ondemand/poller_registry.h"
#include "test_util.h"

using namespace us::prof;

namespace {

struct Recording {
    std::vector<std::pair<double, std::string>> datagrams;
    std::map<int, ProcessInfo> environment;
};

std::string from_hex(const std::string& hex) {
    std::string out;
    for (size_t i = 0; i + 1 < hex.size(); i += 2) out += char(std::stoi(hex.substr(i, 2), nullptr, 16));
    return out;
}

Recording load_recording() {
    std::ifstream in(std::string(US_TEST_DATA_DIR) + "/capture_protocol/kineto_polls.jsonl");
    REQUIRE(in.good());
    Recording r;
    std::string line;
    while (std::getline(in, line)) {
        const nlohmann::json j = nlohmann::json::parse(line);
        r.datagrams.emplace_back(j["t"].get<double>(), from_hex(j["hex"].get<std::string>()));
        if (!j.contains("env")) continue;
        const nlohmann::json& e = j["env"];
        ProcessInfo info;
        info.readable = true;
        info.rank = e["rank"];
        info.world_size = e["world_size"];
        info.local_rank = e["local_rank"];
        info.local_world_size = e["local_world_size"];
        info.launcher_command = e.value("launcher_command", false);
        r.environment[e["pid"].get<int>()] = info;
    }
    return r;
}

}  // namespace

TEST_CASE("datagrams recorded from real Kineto decode and make one job of two ranks and its launcher", "[capture]") {
    const Recording rec = load_recording();
    REQUIRE(rec.datagrams.size() >= 6);
    PollerRegistry registry(
        [&](int pid) { return rec.environment.count(pid) ? rec.environment.at(pid) : ProcessInfo{}; },
        [](int) { return true; });
    std::map<int, std::vector<double>> poll_times;
    for (const auto& [t, bytes] : rec.datagrams) {
        IpcMessage m;
        std::string why;
        INFO(why);
        REQUIRE(decode_ipc_message(bytes.data(), bytes.size(), m, why));
        REQUIRE(m.poll);
        CHECK(m.poll->jobid == 0);  // not under Slurm
        CHECK(m.poll->pids.size() >= 2);
        CHECK(encode_ipc_poll(*m.poll) == bytes);  // what we would send is what Kineto sent, byte for byte
        registry.observe(*m.poll, t);
        poll_times[m.poll->pids.front()].push_back(t);
    }
    const std::vector<PolledJob> jobs = registry.jobs();
    REQUIRE(jobs.size() == 1);
    const PolledJob& job = jobs[0];
    INFO(job.describe());
    REQUIRE(job.ranks.size() == 2);
    CHECK(job.ranks[0].info.rank == 0);
    CHECK(job.ranks[1].info.rank == 1);
    CHECK(job.expected_ranks == 2);
    REQUIRE(job.launchers.size() == 1);
    CHECK(job.ranks[0].ancestors.front() == job.launchers[0].pid);  // torchrun's workers are its children
    CHECK(job.id == std::to_string(job.launchers[0].pid));
    // With ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1 each process polls about once a second.
    for (const auto& [pid, times] : poll_times) {
        if (times.size() < 3) continue;
        const double interval = (times.back() - times.front()) / double(times.size() - 1);
        CHECK(interval > 0.5);
        CHECK(interval < 2.0);
    }
}
