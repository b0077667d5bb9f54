// `ultrascope capture` against real Kineto: a 2-rank torchrun job (gloo, CPU) started with KINETO_USE_DAEMON=1
// from a Python that has torch (ULTRASCOPE_TORCH_PYTHON, else python3), and the capture owning
// the daemon name in a socket directory of the test's own (KINETO_IPC_SOCKET_DIR, so a dynolog on the machine is
// untouched). Without torch the test says so and is skipped, never passed.
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "test_util.h"
#include "torch_job.h"

using namespace us::test;
namespace fs = std::filesystem;

TEST_CASE("capture attaches to a running torchrun job and writes both ranks' files", "[cpu][capture]") {
    const std::string python = python_with_torch();
    if (python.empty()) return skip_test("no Python with torch (set ULTRASCOPE_TORCH_PYTHON to one)");
    const std::string work = temp_path("capture-e2e");
    fs::remove_all(work);
    fs::create_directories(work);
    const std::string env = "KINETO_IPC_SOCKET_DIR=" + work + " ";
    TorchJob job;
    start_torch_job(job, python, work, env, 20000 + ::getpid() % 20000);
    REQUIRE(job.session > 0);
    const std::string out = work + "/captured";
    const ProcessResult capture =
        run_process(env + bin("ultrascope") + " capture --steps 3 --out " + out + " --timeout 100 --roundup 20");
    INFO(capture.output << "\njob log:\n" << read_file(work + "/job.log"));
    REQUIRE(capture.exit_code == 0);
    CHECK(capture.output.find("rank 0 (pid") != std::string::npos);
    CHECK(capture.output.find("ultrascope report " + out) != std::string::npos);
    int rank_files = 0;
    for (const auto& f : fs::directory_iterator(out)) rank_files += f.path().extension() == ".json";
    CHECK(rank_files == 2);
    // Kineto's files were read and removed, and no rank traces a second time (a request it got while tracing would
    // be queued): a few polls later neither FILE nor FILE.tmp is back.
    std::vector<std::string> kineto_files;
    for (size_t at = capture.output.find(": wrote "); at != std::string::npos;
         at = capture.output.find(": wrote ", at + 1))
        kineto_files.push_back(capture.output.substr(at + 8, capture.output.find(' ', at + 8) - at - 8));
    CHECK(kineto_files.size() >= 2);  // two a capture: more when it was taken again with a larger roundup
    CHECK(kineto_files.size() % 2 == 0);
    sleep(4);
    for (const std::string& f : kineto_files) {
        CHECK_FALSE(fs::exists(f));
        CHECK_FALSE(fs::exists(f + ".tmp"));
    }
    // The folder opens as a run of two ranks (their ranks from the distributedInfo the capture added), each with the
    // 3 steps captured, marked from the optimizer steps.
    const ProcessResult report = run_process(bin("ultrascope") + " report " + out + " --json");
    INFO(report.output);
    REQUIRE(report.exit_code == 0);
    const auto j = nlohmann::json::parse(report.output);
    CHECK(j["run"]["world_size"] == 2);
    CHECK(j["run"]["steps_from"] == "ProfilerStep");
    REQUIRE(j["ranks"].size() == 2);
    // ... the same steps: ranks armed a poll apart started on one multiple of the roundup (the capture retries with a
    // larger one when the traces' clocks say they did not; --roundup 20 here often needs it), so the collectives
    // match with the clocks as they are (one host), not by shifting a rank by whole steps
    for (const auto& r : j["ranks"]) {
        CHECK(r["steps"].size() == 3);
        const auto& offset = r["clock_offset_ns"];  // null: the clocks were taken as they are
        CHECK((offset.is_null() || std::abs(offset.get<double>()) < 5e6));
    }
    // A second capture into the same folder is refused and leaves it as it was.
    const ProcessResult again =
        run_process(env + bin("ultrascope") + " capture --steps 1 --out " + out + " --timeout 5");
    CHECK(again.exit_code != 0);
    CHECK(again.output.find("not an empty folder") != std::string::npos);
}

TEST_CASE("capture with no job polling gives up at its timeout, naming the variable to set", "[cpu][capture]") {
    const std::string work = temp_path("capture-e2e-none");
    fs::create_directories(work);
    const ProcessResult r = run_process("KINETO_IPC_SOCKET_DIR=" + work + " " + bin("ultrascope") +
                                        " capture --steps 1 --out " + work + "/out --timeout 2");
    INFO(r.output);
    CHECK(r.exit_code != 0);
    CHECK(r.output.find("KINETO_USE_DAEMON=1") != std::string::npos);
    CHECK_FALSE(fs::exists(work + "/out"));
}
