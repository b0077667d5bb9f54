// A capture against fake Kineto processes (threads that poll a daemon in the test's own socket directory and write
// the file asked for, as Kineto does: a temporary file renamed into place): every rank armed and its file read back,
// a rank that never writes and a job that exits named, and the agent's TCP side refusing a wrong token and naming
// an unknown job.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "app/capture/agent_client.h"
#include "app/capture/agent_protocol.h"
#include "app/capture/agent_server.h"
#include "app/capture/capture_output.h"
#include "app/capture/node_capture.h"
#include "profiler/ondemand/ipc_message.h"
#include "profiler/ondemand/trace_request.h"
#include "profiler/transport/socket.h"
#include "fake_kineto.h"
#include "test_util.h"

using namespace us;
using us::test::FakeKineto;
using us::test::two_ranks;
namespace fs = std::filesystem;

namespace {

std::string socket_dir(const std::string& name) {
    const std::string dir = test::temp_path(name);
    fs::create_directories(dir);
    return dir;
}

}  // namespace

TEST_CASE("a capture arms every rank but the launcher and reads each rank's file back", "[capture]") {
    const std::string dir = socket_dir("ipc-capture");
    prof::OnDemandDaemon daemon(dir, two_ranks, [](int) { return true; });
    daemon.start();
    FakeKineto launcher{dir, {100, 1}}, rank0{dir, {101, 100, 1}}, rank1{dir, {102, 100, 1}};
    launcher.start();
    rank0.start();
    rank1.start();
    std::vector<std::string> lines;
    const app::NodeCaptureResult r =
        app::capture_on_node(daemon, {"", 2, 10, 20}, [&](const std::string& l) { lines.push_back(l); });
    INFO(r.error);
    REQUIRE(r.ok);
    CHECK(r.job_id == "100");
    REQUIRE(r.ranks.size() == 2);
    CHECK(r.ranks[0].rank == 0);
    CHECK(r.ranks[1].pid == 102);
    CHECK(r.ranks[1].raw_bytes.find("\"pid\": 102") != std::string::npos);
    CHECK(launcher.asked == 0);
    CHECK(rank0.asked >= 2);
    const auto said = [&](const std::string& part) {
        return std::any_of(lines.begin(), lines.end(),
                           [&](const std::string& l) { return l.find(part) != std::string::npos; });
    };
    CHECK(said("rank 1 (pid 102): wrote"));
    CHECK(said("job 100: 2 of 2 ranks (0, 1), launcher 100"));
    // Kineto's files are gone: what the capture keeps is what it returned.
    CHECK_FALSE(fs::exists(prof::trace_request_file("/tmp/x.json", 101)));
    // And the folder: written whole, refused when it holds something.
    const std::string out = test::temp_path("capture-out");
    fs::remove_all(out);
    const app::CaptureWritten written = app::write_capture(r.ranks, out);
    REQUIRE(written.rank_files.size() == 2);
    // The message names the folder the files are in, not the staging folder they were written in.
    CHECK(written.message.find("to " + fs::absolute(out).lexically_normal().string() + ":") != std::string::npos);
    CHECK(written.message.find(".partial") == std::string::npos);
    // profiler/capture's rank files: rank<R>.<host>.pt.trace.json, the rank and world size in distributedInfo
    CHECK(fs::path(written.rank_files[1]).filename().string().rfind("rank1.", 0) == 0);
    const auto rank1_file = nlohmann::json::parse(test::read_file(written.rank_files[1]));
    CHECK(rank1_file["distributedInfo"]["rank"] == 1);
    CHECK(rank1_file["distributedInfo"]["world_size"] == 2);
    CHECK_THROWS_WITH(app::write_capture(r.ranks, out), Catch::Contains("is not an empty folder"));
    fs::remove_all(out);
}

TEST_CASE("a rank that never writes its file and a job that exits mid-capture end with a clear message", "[capture]") {
    const std::string dir = socket_dir("ipc-capture-fail");
    std::atomic<bool> rank1_alive{true};
    prof::OnDemandDaemon daemon(dir, two_ranks, [&](int pid) { return pid != 102 || rank1_alive; });
    daemon.start();
    FakeKineto rank0{dir, {101, 100, 1}}, rank1{dir, {102, 100, 1}};
    rank1.writes = false;
    rank0.start();
    rank1.start();
    app::NodeCaptureResult r = app::capture_on_node(daemon, {"100", 2, 10, 3}, [](const std::string&) {});
    CHECK_FALSE(r.ok);
    CHECK(r.error.find("1 rank(s) did not write a trace within 3 s") != std::string::npos);
    CHECK(r.error.find("rank 1 (pid 102)") != std::string::npos);
    CHECK(r.ranks.empty());
    rank1_alive = false;
    rank1.stop = true;
    r = app::capture_on_node(daemon, {"100", 2, 10, 10}, [](const std::string&) {});
    CHECK_FALSE(r.ok);
    CHECK(r.error.find("rank 1 (pid 102) of job 100 exited before writing its trace") != std::string::npos);
    r = app::capture_on_node(daemon, {"555", 2, 10, 1}, [](const std::string&) {});
    CHECK(r.error.find("no job 555 polls this node; the jobs that do:") != std::string::npos);
}

TEST_CASE("the agent refuses a wrong token, names an unknown job and streams a capture's files", "[capture]") {
    app::AgentOptions options;
    options.port = 0;
    options.socket_dir = socket_dir("ipc-agent");
    app::AgentServer server(options, stderr);
    std::atomic<bool> stop{false};
    std::thread serving([&] { server.run(stop); });
    FakeKineto self{options.socket_dir, {int32_t(::getpid()), int32_t(::getppid())}};
    self.start();
    const app::AgentAddress wrong{"127.0.0.1", server.port(), std::string(32, '0')};
    CHECK_THROWS_WITH(app::agent_jobs(wrong), Catch::Contains("refused: wrong token"));
    app::NodeCaptureResult r = app::agent_capture(wrong, {"", 1, 1, 5}, [](const std::string&) {});
    CHECK(r.error.find("wrong token") != std::string::npos);
    const app::AgentAddress good{"127.0.0.1", server.port(), server.token()};
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const nlohmann::json jobs = app::agent_jobs(good);
    REQUIRE(jobs["jobs"].size() == 1);
    CHECK(jobs["jobs"][0]["id"] == std::to_string(::getpid()));
    r = app::agent_capture(good, {"no-such-job", 1, 1, 1}, [](const std::string&) {});
    CHECK(r.error.find("no job no-such-job polls this node") != std::string::npos);
    std::vector<std::string> lines;
    r = app::agent_capture(good, {"", 1, 1, 20}, [&](const std::string& l) { lines.push_back(l); });
    INFO(r.error);
    REQUIRE(r.ok);
    REQUIRE(r.ranks.size() == 1);
    CHECK(r.ranks[0].raw_bytes.find("\"traceEvents\"") != std::string::npos);
    CHECK_FALSE(lines.empty());
    // requests of another shape from the network, before any token is checked: refused, and the agent serves on
    for (const char* bad : {R"({"version":1,"token":12345,"op":"jobs"})", R"({"version":1,"token":null,"op":7})",
                            R"({"version":1,"op":"capture","job":"x","steps":"many"})"}) {
        INFO(bad);
        std::string error, answer;
        prof::Socket raw = prof::connect_to({"127.0.0.1", server.port()}, 5000, error);
        REQUIRE(raw.valid());
        REQUIRE(app::write_frame(raw.fd(), bad, 5000));
        REQUIRE(app::read_frame(raw.fd(), answer, 1 << 20, 5000, error));
        CHECK(nlohmann::json::parse(answer)["ok"] == false);
    }
    CHECK(app::agent_jobs(good)["jobs"].size() == 1);
    const app::AgentAddress closed{"127.0.0.1", 1, server.token()};
    CHECK_THROWS_WITH(app::agent_jobs(closed), Catch::Contains("cannot reach the agent"));
    stop = true;
    serving.join();
}
