// File > Attach to a PyTorch job, under Xvfb: the window lists a job polling this node's endpoint (fake Kineto
// processes from fake_kineto.h, polling a socket directory of the test's own, for two `sleep` processes whose
// environment says RANK 0 and 1), and captures it as runs that open in the views (the recorded on-demand traces of
// tests/data/capture stand for what Kineto writes); then, where a Python with torch is found, a real torchrun job
// captured from the GUI (skipped, never passed, without torch).
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "../unit/fake_kineto.h"
#include "profiler/ondemand/ondemand_daemon.h"
#include "../unit/test_util.h"
#include "../unit/torch_job.h"

using namespace us::test;
namespace fs = std::filesystem;

namespace {

// A process that stands for a rank: its environment is what the daemon reads (/proc/PID/environ).
struct RankProcess {
    int pid = 0;
    explicit RankProcess(int rank) {
        const ProcessResult r = run_process("RANK=" + std::to_string(rank) + " LOCAL_RANK=" + std::to_string(rank) +
                                            " WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 sleep 300 >/dev/null 2>&1 & echo $!");
        pid = std::atoi(r.output.c_str());
        REQUIRE(pid > 0);
    }
    ~RankProcess() {
        if (pid > 0) ::kill(pid, SIGKILL);
    }
};

std::string gunzip(const std::string& path) { return run_process("gunzip -c " + path).output; }

nlohmann::json screenshot_facts(const std::string& shot) { return nlohmann::json::parse(read_file(shot + ".json")); }

}  // namespace

TEST_CASE("the Attach window lists a polling job's ranks and opens its captures as runs side by side", "[gui]") {
    const std::string work = temp_path("gui-attach");
    fs::remove_all(work);
    fs::create_directories(work + "/ipc");
    const std::string dir = work + "/ipc";
    RankProcess p0(0), p1(1);
    const int32_t me = int32_t(::getpid()), parent = int32_t(::getppid());
    FakeKineto launcher{dir, {me, parent}}, rank0{dir, {p0.pid, me, parent}}, rank1{dir, {p1.pid, me, parent}};
    const std::string recorded = std::string(US_TEST_DATA_DIR) + "/capture/ddp_mlp/";
    rank0.content = gunzip(recorded + "trace_32750.json.gz");
    rank1.content = gunzip(recorded + "trace_32751.json.gz");
    REQUIRE(rank0.content.find("traceEvents") != std::string::npos);
    launcher.start(), rank0.start(), rank1.start();
    const std::string env = "KINETO_IPC_SOCKET_DIR=" + dir + " XDG_CACHE_HOME=" + work + "/cache ";

    // The window alone: the job, its two ranks (never the launcher), where it looked.
    const std::string shot = work + "/attach.png";
    ProcessResult r = run_process(env + bin("ultrascope") + " --attach-job --screenshot " + shot + " --view attach");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    nlohmann::json out = screenshot_facts(shot);
    REQUIRE(out["regions"].contains("attach"));
    const nlohmann::json attach = out["shown"]["attach"];
    INFO(attach.dump(1));
    CHECK(attach["where"].get<std::string>().find(dir) != std::string::npos);
    REQUIRE(attach["jobs"].size() == 1);
    CHECK(attach["jobs"][0]["id"] == std::to_string(me));
    REQUIRE(attach["jobs"][0]["ranks"].size() == 2);
    CHECK(attach["jobs"][0]["ranks"][0]["rank"] == 0);
    CHECK(attach["jobs"][0]["ranks"][0]["pid"] == p0.pid);
    CHECK(attach["jobs"][0]["ranks"][1]["pid"] == p1.pid);

    // Two captures of 3 steps: each opens as a run; the first is kept for the Compare tab.
    const std::string shot2 = work + "/captured.png";
    r = run_process(env + bin("ultrascope") + " --attach-job --capture-steps 3 --capture-count 2 --screenshot " +
                    shot2);
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    out = screenshot_facts(shot2)["shown"];
    INFO(out.dump(1));
    const std::string job = "job " + std::to_string(me);
    CHECK(out["source"]["label"].get<std::string>().find("capture 2 of " + job + ", steps 1-3") != std::string::npos);
    CHECK(out["source"]["ranks"] == 2);
    CHECK(out["ranks_view"]["ranks"] == 2);  // blame over both ranks, as a folder of rank files opens
    REQUIRE(out["attach"]["compared_runs"].size() == 1);
    CHECK(out["attach"]["compared_runs"][0].get<std::string>().find("capture 1 of " + job) != std::string::npos);
    CHECK(out["attach"]["error"] == "");
    int folders = 0;
    for (const auto& f : fs::directory_iterator(work + "/cache/ultrascope/captures")) {
        ++folders;
        int rank_files = 0;
        for (const auto& g : fs::directory_iterator(f.path())) rank_files += g.path().extension() == ".json";
        CHECK(rank_files == 2);
    }
    CHECK(folders == 2);
    CHECK(launcher.asked == 0);
    fs::remove_all(work);
}

TEST_CASE("the Attach window shows the capture's message when no job polls and says when the endpoint is taken",
          "[gui]") {
    const std::string work = temp_path("gui-attach-none");
    fs::remove_all(work);
    fs::create_directories(work);
    const std::string env = "KINETO_IPC_SOCKET_DIR=" + work + " XDG_CACHE_HOME=" + work + "/cache ";
    const std::string shot = work + "/none.png";
    ProcessResult r = run_process(env + bin("ultrascope") + " --attach-job --capture-steps 1 --capture-timeout 2 " +
                                  "--screenshot " + shot + " --view attach");
    INFO(r.output);
    CHECK(r.exit_code == 2);  // the window shows the failure, and the run says so
    nlohmann::json out = screenshot_facts(shot)["shown"];
    INFO(out.dump(1));
    CHECK(out["attach"]["jobs"].empty());
    CHECK(out["attach"]["error"].get<std::string>().find("start the job with KINETO_USE_DAEMON=1") !=
          std::string::npos);
    const std::string captures = work + "/cache/ultrascope/captures";
    const bool written = fs::exists(captures) && !fs::is_empty(captures);
    CHECK_FALSE(written);  // nothing half-written

    // Something else owns the endpoint (here the test itself): the window says so and what to do.
    us::prof::OnDemandDaemon owner(work);
    r = run_process(env + bin("ultrascope") + " --attach-job --screenshot " + shot + " --view attach");
    INFO(r.output);
    CHECK(r.exit_code == 0);
    out = screenshot_facts(shot)["shown"];
    CHECK(out["attach"]["listing_error"].get<std::string>().find("is taken") != std::string::npos);
    CHECK(out["attach"]["listing_error"].get<std::string>().find("KINETO_IPC_SOCKET_DIR") != std::string::npos);
    fs::remove_all(work);
}

TEST_CASE("the GUI captures a real torchrun job and opens it as a run", "[gui][torch]") {
    const std::string python = python_with_torch();
    if (python.empty()) return skip_test("no Python with torch (set ULTRASCOPE_TORCH_PYTHON to one)");
    const std::string work = temp_path("gui-attach-torch");
    fs::remove_all(work);
    fs::create_directories(work);
    const std::string env = "KINETO_IPC_SOCKET_DIR=" + work + " ";
    TorchJob job;
    start_torch_job(job, python, work, env, 20000 + (::getpid() + 7) % 20000);
    REQUIRE(job.session > 0);
    const std::string shot = work + "/torch.png";
    const ProcessResult r = run_process(env + "XDG_CACHE_HOME=" + work + "/cache " + bin("ultrascope") +
                                        " --attach-job --capture-steps 3 --screenshot " + shot);
    INFO(r.output << "\njob log:\n" << read_file(work + "/job.log"));
    REQUIRE(r.exit_code == 0);
    const nlohmann::json out = screenshot_facts(shot)["shown"];
    INFO(out.dump(1));
    CHECK(out["source"]["label"].get<std::string>().find("capture 1 of job ") != std::string::npos);
    CHECK(out["source"]["ranks"] == 2);
    CHECK(out["ranks_view"]["ranks"] == 2);
    CHECK(out["attach"]["error"] == "");
}
