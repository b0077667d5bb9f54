// The capture's progress API (app/capture/capture_job.h), what the GUI's Attach window draws: each rank's state
// from waiting for its poll to its file written, the events of an agent's node carried over TCP, cancel, and the
// CLI's messages when nothing polls. Against fake Kineto processes (fake_kineto.h) and against datagrams recorded
// from real Kineto (tests/data/capture_protocol) replayed to the daemon.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <map>
#include <thread>

#include "app/capture/agent_server.h"
#include "app/capture/capture_job.h"
#include "fake_kineto.h"
#include "test_util.h"

using namespace us;
using test::FakeKineto;
namespace fs = std::filesystem;

namespace {

std::string socket_dir(const std::string& name) {
    const std::string dir = test::temp_path(name);
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

// The events of a capture, kept as they come (from the capture's threads).
struct Events {
    std::mutex mutex;
    std::vector<app::CaptureEvent> all;
    app::CaptureCallbacks callbacks() {
        app::CaptureCallbacks c;
        c.on_event = [this](const app::CaptureEvent& e) {
            std::lock_guard lock(mutex);
            all.push_back(e);
        };
        return c;
    }
    std::vector<app::RankState> states_of(int pid) {
        std::lock_guard lock(mutex);
        std::vector<app::RankState> out;
        for (const app::CaptureEvent& e : all)
            if (e.kind == app::CaptureEvent::Kind::rank && e.rank.pid == pid) out.push_back(e.rank.state);
        return out;
    }
    size_t count() {
        std::lock_guard lock(mutex);
        return all.size();
    }
    bool said(const std::string& text) {
        std::lock_guard lock(mutex);
        return std::any_of(all.begin(), all.end(),
                           [&](const app::CaptureEvent& e) { return e.text.find(text) != std::string::npos; });
    }
};

// A capture of `steps` steps into a fresh temporary folder named `out`.
app::CaptureOptions capture_options(int steps, int roundup, double timeout_s, const std::string& out) {
    app::CaptureOptions o;
    o.steps = steps, o.roundup = roundup, o.timeout_s = timeout_s;
    o.out = test::temp_path(out);
    fs::remove_all(o.out);
    return o;
}

}  // namespace

TEST_CASE("capture_job reports each rank's state from its poll to its file and writes the folder", "[capture]") {
    const std::string dir = socket_dir("ipc-capture-job");
    prof::OnDemandDaemon daemon(dir, test::two_ranks, [](int) { return true; });
    daemon.start();
    FakeKineto launcher{dir, {100, 1}}, rank0{dir, {101, 100, 1}}, rank1{dir, {102, 100, 1}};
    // What Kineto wrote for two ranks of a DDP job (tests/data/capture): the same 3 steps, so no retry.
    const std::string recorded = std::string(US_TEST_DATA_DIR) + "/capture/ddp_mlp/";
    rank0.content = test::run_process("gunzip -c " + recorded + "trace_32750.json.gz").output;
    rank1.content = test::run_process("gunzip -c " + recorded + "trace_32751.json.gz").output;
    launcher.start(), rank0.start(), rank1.start();
    Events events;
    app::CaptureCallbacks callbacks = events.callbacks();
    callbacks.daemon = &daemon;  // the caller's endpoint, as the Attach window owns it
    const app::CaptureOptions o = capture_options(2, 10, 20, "capture-job-out");
    const app::CaptureOutcome done = app::capture_job(o, callbacks);
    INFO(done.error);
    REQUIRE(done.ok);
    CHECK(done.job_id == "100");
    CHECK(done.folder == o.out);
    REQUIRE(done.written.rank_files.size() == 2);
    CHECK(done.written.same_steps);
    CHECK(done.written.steps == 3);
    CHECK(done.roundup == 10);  // taken once
    for (const std::string& f : done.written.rank_files) CHECK(fs::exists(f));
    for (int pid : {101, 102}) {
        INFO("pid " << pid);
        const std::vector<app::RankState> states = events.states_of(pid);
        REQUIRE_FALSE(states.empty());
        CHECK(states.front() == app::RankState::waiting_for_poll);  // armed, its next poll not yet come
        CHECK(std::is_sorted(states.begin(), states.end()));        // onwards only (asked again may pass unseen)
        CHECK(states.back() == app::RankState::written);
    }
    CHECK(events.states_of(100).empty());  // the launcher is never armed
    // Each rank event is followed by the line the CLI prints for it.
    std::lock_guard lock(events.mutex);
    for (size_t i = 0; i + 1 < events.all.size(); ++i)
        if (events.all[i].kind == app::CaptureEvent::Kind::rank) {
            CHECK(events.all[i + 1].kind == app::CaptureEvent::Kind::line);
            CHECK(events.all[i + 1].text.find("pid " + std::to_string(events.all[i].rank.pid)) != std::string::npos);
        }
    fs::remove_all(o.out);
}

TEST_CASE("a process taken for a lone job is dropped when its workers poll late: the capture takes its ranks",
          "[capture]") {
    const std::string dir = socket_dir("ipc-capture-late-workers");
    // Pid 100 is a launcher that no command line gives away (not torchrun): alone, it is taken for a one-process job.
    const auto reader = [](int pid) {
        prof::ProcessInfo info = test::two_ranks(pid);
        info.launcher_command = false;
        return info;
    };
    prof::OnDemandDaemon daemon(dir, reader, [](int) { return true; });
    daemon.start();
    FakeKineto launcher{dir, {100, 1}}, rank0{dir, {101, 100, 1}}, rank1{dir, {102, 100, 1}};
    launcher.writes = false;  // were it kept as the job, the capture would wait for it to its timeout
    launcher.start();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // polled alone a few times
    std::thread late([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(1700));  // the workers' first polls come late
        rank0.start(), rank1.start();
    });
    Events events;
    app::CaptureCallbacks callbacks = events.callbacks();
    callbacks.daemon = &daemon;
    const app::CaptureOptions o = capture_options(1, 10, 20, "capture-late-workers-out");
    const app::CaptureOutcome done = app::capture_job(o, callbacks);
    late.join();
    INFO(done.error);
    REQUIRE(done.ok);
    CHECK(done.job_id == "100");
    REQUIRE(done.written.rank_files.size() == 2);
    CHECK(events.states_of(101).back() == app::RankState::written);
    CHECK(events.states_of(102).back() == app::RankState::written);
    CHECK(launcher.asked >= 1);  // it was armed as the lone job, then dropped
    CHECK(events.said("pid 100 launches the ranks"));
    fs::remove_all(o.out);
}

TEST_CASE("capture_job cancels at once and writes nothing, and with nothing polling it names KINETO_USE_DAEMON=1",
          "[capture]") {
    const std::string dir = socket_dir("ipc-capture-job-cancel");
    prof::OnDemandDaemon daemon(dir, test::two_ranks, [](int) { return true; });
    daemon.start();
    app::CaptureOptions o = capture_options(2, 10, 1, "capture-job-none");
    Events events;
    app::CaptureCallbacks callbacks = events.callbacks();
    callbacks.daemon = &daemon;
    app::CaptureOutcome r = app::capture_job(o, callbacks);
    CHECK_FALSE(r.ok);
    CHECK(r.error.find("start the job with KINETO_USE_DAEMON=1") != std::string::npos);
    CHECK_FALSE(fs::exists(o.out));

    FakeKineto rank0{dir, {101, 100, 1}}, rank1{dir, {102, 100, 1}};
    rank1.writes = false;  // rank 1 never writes: only cancel ends the capture before its timeout
    rank0.start(), rank1.start();
    std::atomic<bool> cancel{false};
    callbacks.cancel = &cancel;
    o.timeout_s = 60;
    std::thread canceller([&] {
        while (events.states_of(102).size() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        cancel = true;
    });
    const double t0 = prof::steady_seconds();
    r = app::capture_job(o, callbacks);
    canceller.join();
    CHECK_FALSE(r.ok);
    CHECK(r.error.find("cancelled") != std::string::npos);
    CHECK(prof::steady_seconds() - t0 < 10);
    CHECK_FALSE(fs::exists(o.out));
}

TEST_CASE("capture_job says the endpoint is taken, and carries an agent's rank states over TCP", "[capture]") {
    app::AgentOptions options;
    options.port = 0;
    options.socket_dir = socket_dir("ipc-capture-job-agent");
    app::AgentServer server(options, stderr);
    std::atomic<bool> stop{false};
    std::thread serving([&] { server.run(stop); });
    // This node's name held by the agent, which no discovery file names here (the CLI's `agent` writes one): a
    // capture with no agent given says the name is taken and what to do.
    {
        const char* before = std::getenv("KINETO_IPC_SOCKET_DIR");
        const std::string saved = before ? before : "";
        ::setenv("KINETO_IPC_SOCKET_DIR", options.socket_dir.c_str(), 1);
        app::CaptureOptions here;
        here.timeout_s = 1;
        here.out = test::temp_path("capture-job-taken");
        fs::remove_all(here.out);
        const app::CaptureOutcome taken = app::capture_job(here, {});
        before ? ::setenv("KINETO_IPC_SOCKET_DIR", saved.c_str(), 1) : ::unsetenv("KINETO_IPC_SOCKET_DIR");
        CHECK_FALSE(taken.ok);
        CHECK(taken.error.find("is taken: a dynolog daemon or an `ultrascope agent`") != std::string::npos);
        CHECK(taken.error.find("KINETO_IPC_SOCKET_DIR=DIR") != std::string::npos);
        CHECK_FALSE(fs::exists(here.out));
    }
    FakeKineto self{options.socket_dir, {int32_t(::getpid()), int32_t(::getppid())}};
    self.start();
    Events events;
    app::CaptureOptions o = capture_options(1, 1, 20, "capture-job-agent-out");
    o.agents = {"127.0.0.1:" + std::to_string(server.port())};
    o.token = server.token();
    const app::CaptureOutcome done = app::capture_job(o, events.callbacks());
    INFO(done.error);
    REQUIRE(done.ok);
    const std::vector<app::RankState> states = events.states_of(::getpid());
    REQUIRE_FALSE(states.empty());
    CHECK(states.back() == app::RankState::written);
    {
        std::lock_guard lock(events.mutex);
        for (const app::CaptureEvent& e : events.all)  // a retry is the whole capture's, not a node's
            if (e.kind != app::CaptureEvent::Kind::retried) CHECK(e.node == o.agents[0]);
    }
    o.token = std::string(32, '0');
    fs::remove_all(o.out);
    const app::CaptureOutcome refused = app::capture_job(o, events.callbacks());
    CHECK(refused.error.find("wrong token") != std::string::npos);
    CHECK_FALSE(fs::exists(o.out));
    stop = true;
    serving.join();
}

TEST_CASE("a capture cancelled through an agent ends on the agent at once and disarms its ranks", "[capture]") {
    app::AgentOptions options;
    options.port = 0;
    options.socket_dir = socket_dir("ipc-capture-job-agent-cancel");
    const std::string log_path = test::temp_path("agent-cancel.log");
    std::FILE* log = std::fopen(log_path.c_str(), "w");
    REQUIRE(log);
    std::setvbuf(log, nullptr, _IONBF, 0);
    {
        app::AgentServer server(options, log);
        std::atomic<bool> stop{false};
        std::thread serving([&] { server.run(stop); });
        FakeKineto rank{options.socket_dir, {int32_t(::getpid()), int32_t(::getppid())}};
        rank.writes = false;  // never writes: only a cancel, or the timeout, ends the capture
        rank.start();
        Events events;
        app::CaptureCallbacks callbacks = events.callbacks();
        std::atomic<bool> cancel{false};
        callbacks.cancel = &cancel;
        app::CaptureOptions o = capture_options(1, 1, 60, "capture-job-agent-cancel-out");
        o.agents = {"127.0.0.1:" + std::to_string(server.port())};
        o.token = server.token();
        std::thread canceller([&] {
            while (events.states_of(::getpid()).size() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
            cancel = true;
        });
        const double t0 = prof::steady_seconds();
        const app::CaptureOutcome r = app::capture_job(o, callbacks);
        canceller.join();
        CHECK_FALSE(r.ok);
        // The agent sees the connection close and gives up too (before, it waited out the 60 s, the rank armed).
        bool ended = false;
        while (!ended && prof::steady_seconds() - t0 < 10) {
            ended = test::read_file(log_path).find("ended without files: the client closed the connection") !=
                    std::string::npos;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        INFO(test::read_file(log_path));
        CHECK(ended);
        // The job is free again: a new capture is not refused as one already running.
        o.timeout_s = 1;
        callbacks.cancel = nullptr;
        const app::CaptureOutcome again = app::capture_job(o, callbacks);
        CHECK_FALSE(again.ok);
        CHECK(again.error.find("already running") == std::string::npos);
        CHECK_FALSE(fs::exists(o.out));
        stop = true;
        serving.join();
    }
    std::fclose(log);
}

TEST_CASE("datagrams recorded from real Kineto, replayed: both ranks armed and asked, the launcher never",
          "[capture]") {
    // The recording's processes and their environments (test_capture_replay.cpp reads the same file).
    std::ifstream in(std::string(US_TEST_DATA_DIR) + "/capture_protocol/kineto_polls.jsonl");
    REQUIRE(in.good());
    std::vector<std::string> datagrams;
    std::map<int, prof::ProcessInfo> environment;
    for (std::string line; std::getline(in, line);) {
        const nlohmann::json j = nlohmann::json::parse(line);
        std::string bytes;
        const std::string hex = j["hex"];
        for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes += char(std::stoi(hex.substr(i, 2), nullptr, 16));
        datagrams.push_back(bytes);
        if (!j.contains("env")) continue;
        prof::ProcessInfo info;
        info.readable = true;
        info.rank = j["env"]["rank"], info.world_size = j["env"]["world_size"];
        info.local_rank = j["env"]["local_rank"], info.local_world_size = j["env"]["local_world_size"];
        info.launcher_command = j["env"].value("launcher_command", false);
        environment[j["env"]["pid"].get<int>()] = info;
    }
    const std::string dir = socket_dir("ipc-capture-job-replay");
    prof::OnDemandDaemon daemon(
        dir, [&](int pid) { return environment.count(pid) ? environment.at(pid) : prof::ProcessInfo{}; },
        [](int) { return true; });
    daemon.start();
    std::atomic<bool> stop{false};
    std::thread replay([&] {  // the recorded polls again and again, 30 ms apart; nothing writes a file
        for (size_t i = 0; !stop; i = (i + 1) % datagrams.size()) {
            std::string answer;
            prof::ipc_send_and_receive(dir, datagrams[i], answer, 500);
            std::this_thread::sleep_for(std::chrono::milliseconds(30));
        }
    });
    Events events;
    app::CaptureCallbacks callbacks = events.callbacks();
    callbacks.daemon = &daemon;
    const app::CaptureOptions o = capture_options(2, 10, 4, "capture-job-replay-out");
    const app::CaptureOutcome r = app::capture_job(o, callbacks);
    stop = true;
    replay.join();
    CHECK_FALSE(r.ok);
    CHECK(r.error.find("2 rank(s) did not write a trace within 4 s") != std::string::npos);
    int ranks_seen = 0;
    for (const auto& [pid, info] : environment) {
        const std::vector<app::RankState> states = events.states_of(pid);
        if (info.rank < 0) {
            CHECK(states.empty());  // the launcher
            continue;
        }
        ++ranks_seen;
        INFO("rank " << info.rank);
        REQUIRE_FALSE(states.empty());
        CHECK(states.front() == app::RankState::waiting_for_poll);
        CHECK(states.back() == app::RankState::asked);
    }
    CHECK(ranks_seen == 2);
    CHECK_FALSE(fs::exists(o.out));
}
