// Nothing the product launches outlives it: `ultrascope run` stopped by a signal (or killed outright) leaves no
// mpirun and no rank behind, and the trace reads. A run attached from elsewhere keeps training when its listener
// goes away; a launched one stops with it. Each run is found by a marker in its command line (its data file's
// unique path), so the checks see only this test's processes.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "profiler/transport/listener.h"
#include "profiler/transport/protocol.h"
#include "test_util.h"

using namespace us::test;
namespace fs = std::filesystem;

namespace {

std::string ultrascope() { return bin("ultrascope"); }

// Starts `ultrascope run` (dp 2, far more steps than it will get to) and waits until its trace holds data.
std::unique_ptr<BackgroundProcess> start_long_run(const std::string& name, std::string& data, std::string& trace) {
    data = sample_data_file("lifetime-" + name + ".txt", 20000);
    trace = temp_path("lifetime-" + name + ".ustrace");
    fs::remove(trace);
    auto p = std::make_unique<BackgroundProcess>(
        ultrascope() + " run -n 2 --dp 2 --trace " + trace + " --preset tiny --steps 1000000 --data " + data,
        temp_path("lifetime-" + name + ".log"));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline && !p->exited() &&
           (!fs::exists(trace) || fs::file_size(trace) < 50000))
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    INFO(p->output());
    REQUIRE(!p->exited());
    REQUIRE(processes_matching(data) >= 3);  // mpirun and two ranks
    return p;
}

nlohmann::json report_of(const std::string& trace) {
    const ProcessResult rep = run_process(ultrascope() + " report " + trace + " --json");
    INFO(rep.output);
    REQUIRE(rep.exit_code == 0);
    return nlohmann::json::parse(rep.output.substr(rep.output.find('{')));
}

}  // namespace

TEST_CASE("ultrascope run stopped by SIGTERM, SIGINT or SIGHUP stops its ranks, whose traces say they stopped",
          "[cpu][app][lifetime]") {
    for (const auto& [sig, name] : {std::pair{SIGTERM, "term"}, std::pair{SIGINT, "int"}, std::pair{SIGHUP, "hup"}}) {
        std::string data, trace;
        auto run = start_long_run(name, data, trace);
        run->signal(sig);
        const std::optional<int> code = run->wait_exit(20);
        INFO(name << ": " << run->output());
        REQUIRE(code.has_value());
        CHECK(*code == 128 + sig);  // the run did not finish: the shell's code for a stop by that signal
        CHECK(run->output().find("stopping the run") != std::string::npos);
        CHECK(wait_processes_gone(data, 10) == 0);
        const auto j = report_of(trace);
        REQUIRE(j["ranks"].size() == 2);
        for (const auto& r : j["ranks"]) {
            CHECK(r["steps"].size() >= 1);
            // mpirun passed the SIGTERM on; each rank closed its stream itself and said why (nothing was cut off)
            CHECK(r["status"].get<std::string>().rfind("stopped: SIGTERM", 0) == 0);
        }
    }
}

TEST_CASE("ultrascope run killed by SIGKILL: mpirun and its ranks stop within 10 s, the trace reads",
          "[cpu][app][lifetime]") {
    std::string data, trace;
    auto run = start_long_run("kill", data, trace);
    run->signal(SIGKILL);
    REQUIRE(run->wait_exit(5).value_or(0) == 128 + SIGKILL);
    CHECK(wait_processes_gone(data, 10) == 0);  // the kernel's PR_SET_PDEATHSIG stopped mpirun, and mpirun its ranks
    const auto j = report_of(trace);            // written by the killed listener up to its last whole chunk
    REQUIRE(j["ranks"].size() == 2);
    CHECK(j["ranks"][0]["steps"].size() >= 1);
}

namespace {

// The folders under /dev/shm of launches whose program's command line holds `marker` (app/launch/shm_folder.h).
std::vector<fs::path> shm_folders_of(const std::string& marker) {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/dev/shm", ec)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("ultrascope-shm-", 0) != 0) continue;
        // ultrascope-shm-<pid namespace>-<pid>-<n>
        const size_t pid_at = name.find('-', 15);
        if (pid_at == std::string::npos) continue;
        const std::string cmdline =
            read_file("/proc/" + std::to_string(std::atol(name.c_str() + pid_at + 1)) + "/cmdline");
        if (cmdline.find(marker) != std::string::npos) out.push_back(e.path());
    }
    return out;
}

}  // namespace

TEST_CASE("Open MPI's shared-memory segments of a killed run are removed by the next launch", "[cpu][app][lifetime]") {
    if (!fs::is_directory("/dev/shm")) return skip_test("no /dev/shm on this machine");
    std::string data, trace;
    auto run = start_long_run("shm", data, trace);
    const std::vector<fs::path> folders = shm_folders_of(data);
    REQUIRE(folders.size() == 1);  // the launch's own folder, named after it
    size_t segments = 0;
    for (const auto& e : fs::directory_iterator(folders[0])) segments += e.is_regular_file();
    CHECK(segments >= 1);  // Open MPI put its segments there, not loose in /dev/shm
    run->signal(SIGKILL);
    REQUIRE(run->wait_exit(5).value_or(0) == 128 + SIGKILL);
    CHECK(wait_processes_gone(data, 10) == 0);
    CHECK(fs::exists(folders[0]));  // killed outright, it could not clean up
    const std::string next_data = sample_data_file("lifetime-shm-next.txt", 20000);
    const ProcessResult next = run_process(ultrascope() + " run -n 2 --dp 2 --preset tiny --steps 2 --data " +
                                           next_data + " --trace " + temp_path("lifetime-shm-next.ustrace"));
    INFO(next.output);
    CHECK(next.exit_code == 0);
    CHECK_FALSE(fs::exists(folders[0]));  // the next launch removed what the killed one left
    CHECK(next.output.find("removed what a killed run") != std::string::npos);
    CHECK(shm_folders_of(next_data).empty());  // and its own, when it ended
}

namespace {

// One rank streaming to a listener of this test, which then goes away while the rank trains.
struct ListenerGoneResult {
    std::optional<int> exit_code;
    std::string output;
    nlohmann::json report;
};

ListenerGoneResult lose_listener_mid_run(const std::string& name, bool stop_with_listener, int steps) {
    auto listener = std::make_unique<us::prof::TraceListener>("127.0.0.1", 0, us::prof::random_token());
    const std::string data = sample_data_file("listener-" + name + ".txt", 20000);
    const std::string trace = temp_path("listener-" + name + ".ustrace");
    const std::string metrics = temp_path("listener-" + name + ".jsonl");
    fs::remove(trace);
    fs::remove(metrics);
    const std::string env = "env ULTRASCOPE_TOKEN=" + listener->token() +
                            " ULTRASCOPE_STOP_WITH_LISTENER=" + (stop_with_listener ? "1" : "0") + " ";
    BackgroundProcess rank(env + bin("ultrascope-train") + " --preset tiny --steps " + std::to_string(steps) +
                               " --quiet --connect 127.0.0.1:" + std::to_string(listener->port()) + " --trace " +
                               trace + " --metrics-out " + metrics + " --data " + data,
                           temp_path("listener-" + name + ".log"));
    // Let it connect and train a few steps, then take the listener away.
    bool connected = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    std::vector<us::prof::ListenerMessage> messages;
    while (!connected && std::chrono::steady_clock::now() < deadline && !rank.exited()) {
        listener->poll(messages);
        for (auto& m : messages) connected |= m.kind == us::prof::ListenerMessage::Kind::connected;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    REQUIRE(connected);
    while (!fs::exists(metrics) || read_file(metrics).size() < 2000)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    listener.reset();
    ListenerGoneResult r;
    r.exit_code = rank.wait_exit(300);  // generous: the rank trains alone, and CI machines are shared
    r.output = rank.output();
    r.report = report_of(trace);
    return r;
}

}  // namespace

TEST_CASE("a run attached from elsewhere keeps training when the listener goes away, and says so once",
          "[cpu][app][lifetime]") {
    const ListenerGoneResult r = lose_listener_mid_run("attached", false, 300);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const std::string said = "the live stream to 127.0.0.1";
    REQUIRE(r.output.find(said) != std::string::npos);
    CHECK(r.output.find(said, r.output.find(said) + 1) == std::string::npos);  // once
    REQUIRE(r.report["ranks"].size() == 1);
    CHECK(r.report["ranks"][0]["status"] == "ok");
    CHECK(r.report["ranks"][0]["steps"].size() == 300);  // its own trace file has every step
}

TEST_CASE("a launched run stops, at a step boundary, when its listener goes away", "[cpu][app][lifetime]") {
    const ListenerGoneResult r = lose_listener_mid_run("launched", true, 20000);
    INFO(r.output);
    REQUIRE(r.exit_code == 143);
    CHECK(r.output.find("the launcher's live stream is gone: stopping after step") != std::string::npos);
    REQUIRE(r.report["ranks"].size() == 1);
    const size_t steps = r.report["ranks"][0]["steps"].size();
    CHECK(steps >= 1);
    CHECK(steps < 20000);
    CHECK(r.report["ranks"][0]["status"].get<std::string>().rfind("stopped: the launcher's live stream went away", 0) ==
          0);
}
